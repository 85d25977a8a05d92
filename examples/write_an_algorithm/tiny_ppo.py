"""TinyPPO: a clipped-objective PPO for Discrete actions, written as a user of the lab writes an algorithm, outside
the package, against the contract of docs/write-an-algorithm.md. Every line of the algorithm is in this file.

A spec names it `"algorithm": {"name": "tiny_ppo:TinyPPO", ...}` and runs from this directory
(`python ../../run_lab.py tiny_ppo_cartpole.json`): modules in the current directory are importable.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from slm_lab_like.agents import AgentContext, Algorithm, Transition


@dataclass
class TinyPPOConfig:
    """The spec's `algorithm` keys besides `name`; `check` refuses any other key and values out of range."""

    gamma: float = field(default=0.99, metadata={"min": 0.0, "max": 1.0})
    lam: float = field(default=0.95, metadata={"min": 0.0, "max": 1.0})
    lr: float = field(default=2.5e-4, metadata={"min": 0.0})
    n_steps: int = field(default=128, metadata={"min": 1})  # steps of every body between two updates
    epochs: int = field(default=4, metadata={"min": 1})
    minibatches: int = field(default=4, metadata={"min": 1})
    clip: float = field(default=0.2, metadata={"min": 0.0})
    ent_coef: float = field(default=0.0, metadata={"min": 0.0})
    vf_coef: float = field(default=0.5, metadata={"min": 0.0})
    hidden: int = field(default=64, metadata={"min": 1})


def layer(n_in: int, n_out: int, gain: float = float(np.sqrt(2))) -> nn.Linear:
    """A linear layer with orthogonal weights and zero biases, as PPO implementations initialise them."""
    linear = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(linear.weight, gain)
    nn.init.zeros_(linear.bias)
    return linear


class TinyPPO(Algorithm):
    """One actor and one critic for all the agent's bodies; one rollout of `n_steps` rows per body group."""

    Config = TinyPPOConfig
    action_spaces = (gym.spaces.Discrete,)  # check refuses a spec that puts it in an env of other actions
    takes_masks = False  # it does not act within legal-action masks, so check refuses turn-based games for it

    @classmethod
    def signatures_problem(cls, signatures: Sequence[tuple[gym.Space, gym.Space]]) -> str | None:
        """One actor and one critic: every body group must see the same observations and take the same actions."""
        if len({(obs.shape, act.n) for obs, act in signatures}) > 1:
            return "TinyPPO has one net for one observation shape and one action count; its bodies' envs differ"
        return None

    def __init__(self, config: TinyPPOConfig, ctx: AgentContext) -> None:
        super().__init__(config, ctx)
        self.check_groups()
        torch.manual_seed(ctx.seed)
        obs_dim = int(np.prod(self.groups[0].observation_space.shape))
        n_actions = int(self.groups[0].action_space.n)
        h = config.hidden
        self.actor = nn.Sequential(layer(obs_dim, h), nn.Tanh(), layer(h, h), nn.Tanh(), layer(h, n_actions, 0.01))
        self.critic = nn.Sequential(layer(obs_dim, h), nn.Tanh(), layer(h, h), nn.Tanh(), layer(h, 1, 1.0))
        self.optim = torch.optim.Adam([*self.actor.parameters(), *self.critic.parameters()], lr=config.lr, eps=1e-5)
        self.rng = torch.Generator().manual_seed(ctx.seed)
        self.rollouts = [self._empty(g.num_bodies, obs_dim) for g in self.groups]
        self.last_act: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(self.groups)

    def _empty(self, n: int, obs_dim: int) -> dict[str, Any]:
        """A rollout of `n_steps` rows of `n` bodies, filled row by row by update()."""
        t = self.config.n_steps
        return {"obs": torch.zeros(t, n, obs_dim), "action": torch.zeros(t, n, dtype=torch.long),
                "logp": torch.zeros(t, n), "value": torch.zeros(t, n), "reward": torch.zeros(t, n),
                "done": torch.zeros(t, n), "row": 0}

    def act(self, group: int, obs: np.ndarray, mask: np.ndarray | None = None,
            acting: np.ndarray | None = None) -> np.ndarray:
        """Sampled actions while training, the most likely ones when evaluated (set_training(False))."""
        x = torch.as_tensor(obs, dtype=torch.float32).reshape(len(obs), -1)
        with torch.no_grad():
            logits = self.actor(x)
            if not self.training:
                return logits.argmax(dim=1).numpy()
            action = torch.multinomial(torch.softmax(logits, dim=1), 1, generator=self.rng).squeeze(1)
            logp = torch.log_softmax(logits, dim=1).gather(1, action[:, None]).squeeze(1)
            self.last_act[group] = (logp, self.critic(x).squeeze(1))
        return action.numpy()

    def update(self, group: int, transition: Transition) -> None:
        """Store the step (rewards bootstrapped where an episode was cut by a time limit); learn when it is full."""
        super().update(group, transition)  # counts frames
        if not self.training or self.last_act[group] is None:
            return
        t = transition
        ro = self.rollouts[group]
        reward = torch.as_tensor(t.reward, dtype=torch.float32)
        cut = torch.as_tensor(t.truncated & ~t.terminated)
        if cut.any():  # a truncated episode is not a loss: bootstrap from its final observation
            with torch.no_grad():
                final = torch.as_tensor(t.final_obs, dtype=torch.float32).reshape(len(reward), -1)
                reward = reward + self.config.gamma * cut * self.critic(final).squeeze(1)
        row = ro["row"]
        ro["obs"][row] = torch.as_tensor(t.obs, dtype=torch.float32).reshape(len(reward), -1)
        ro["action"][row] = torch.as_tensor(t.action, dtype=torch.long)
        ro["logp"][row], ro["value"][row] = self.last_act[group]
        ro["reward"][row] = reward
        ro["done"][row] = torch.as_tensor(t.terminated | t.truncated, dtype=torch.float32)
        ro["row"] = row + 1
        if ro["row"] == self.config.n_steps:
            next_obs = torch.as_tensor(t.next_obs, dtype=torch.float32).reshape(len(reward), -1)
            self._learn(ro, next_obs)
            ro["row"] = 0

    def _learn(self, ro: dict[str, Any], next_obs: torch.Tensor) -> None:
        """GAE advantages, then `epochs` passes of clipped-objective minibatch steps over the rollout."""
        c = self.config
        with torch.no_grad():
            next_value = self.critic(next_obs).squeeze(1)
        adv = torch.zeros_like(ro["reward"])
        gae = torch.zeros_like(next_value)
        for k in reversed(range(c.n_steps)):
            value_after = next_value if k == c.n_steps - 1 else ro["value"][k + 1]
            live = 1.0 - ro["done"][k]
            delta = ro["reward"][k] + c.gamma * value_after * live - ro["value"][k]
            gae = delta + c.gamma * c.lam * live * gae
            adv[k] = gae
        ret = adv + ro["value"]
        obs, action, logp_old = ro["obs"].flatten(0, 1), ro["action"].flatten(), ro["logp"].flatten()
        adv, ret = adv.flatten(), ret.flatten()
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)  # normalised over the whole rollout, so any minibatch size works
        for _ in range(c.epochs):
            order = torch.randperm(len(adv), generator=self.rng)
            for mb in order.chunk(c.minibatches):  # at most `minibatches` parts of the rollout
                logits = self.actor(obs[mb])
                logp = torch.log_softmax(logits, dim=1).gather(1, action[mb, None]).squeeze(1)
                entropy = torch.distributions.Categorical(logits=logits).entropy().mean()
                ratio = torch.exp(logp - logp_old[mb])
                a = adv[mb]
                policy_loss = -torch.min(ratio * a, torch.clamp(ratio, 1 - c.clip, 1 + c.clip) * a).mean()
                value_loss = 0.5 * ((self.critic(obs[mb]).squeeze(1) - ret[mb]) ** 2).mean()
                loss = policy_loss + c.vf_coef * value_loss - c.ent_coef * entropy
                self.optim.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_([*self.actor.parameters(), *self.critic.parameters()], 0.5)
                self.optim.step()
                self.opt_step += 1
        self.last_loss = float(loss.detach())
        self.stats.report(self.frame, {"train/policy_loss": policy_loss, "train/value_loss": value_loss,
                                       "train/entropy": entropy})

    def state_dict(self) -> dict[str, Any]:
        """Nets, optimiser and generator: what a checkpoint keeps, so a resumed run goes on where this one was."""
        return {**super().state_dict(), "actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
                "optim": self.optim.state_dict(), "rng": self.rng.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what state_dict gave; a partly collected rollout starts again."""
        super().load_state_dict(state)
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.optim.load_state_dict(state["optim"])
        self.rng.set_state(state["rng"])
        for ro in self.rollouts:
            ro["row"] = 0
        self.last_act = [None] * len(self.groups)
