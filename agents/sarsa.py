"""SARSA: on-policy TD control. The Q-net learns Q(s, a) toward r + gamma * Q(s', a'), a' the action the body took
next (Rummery and Niranjan 1994), exploring epsilon-greedily or by Boltzmann sampling as DQN does."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from slm_lab_like.agents.base import AgentContext, Algorithm, Transition, discrete_n
from slm_lab_like.agents.common import build_net, group_signatures, obs_shape, prepare_obs, to_tensor, zero_based_problem
from slm_lab_like.agents.config import resolve_component
from slm_lab_like.agents.explore import explore, explore_stat
from slm_lab_like.agents.net.base import Optim, resolve_device
from slm_lab_like.agents.normalizer import ObsNormalizer
from slm_lab_like.agents.registry import MEMORIES, NETS
from slm_lab_like.agents.schedule import Schedule, value_at


@dataclass
class SARSAConfig:
    """SARSA hyperparameters. A training round (`gradient_steps` steps on every transition finished since the last
    round) comes once a group's bodies have finished `n_steps` transitions each (the OnPolicyBatch memory's
    n_steps). A transition is finished when its body acts again (a' known) or its episode ends: terminated, the
    target is r; cut by a time limit, a' was never taken at the final obs, and its expectation under the exploring
    policy stands in (expected SARSA). Exploration as DQN's, with schedules over agent frames."""

    gamma: float = field(default=0.99, metadata={"min": 0.0, "max": 1.0})
    explore: Literal["epsilon_greedy", "boltzmann"] = "epsilon_greedy"
    epsilon: float | Schedule = field(default_factory=lambda: Schedule(name="linear", start=1.0, end=0.05, frames=10000),
                                      metadata={"min": 0.0, "max": 1.0})
    temperature: float | Schedule = field(default=1.0, metadata={"min": 0.0})
    gradient_steps: int = field(default=1, metadata={"min": 1})
    loss: Literal["mse", "huber"] = "mse"
    normalize_obs: bool = False


class _Rows:
    """A group's finished transitions since its last round, and each body's transition waiting for its next action."""

    def __init__(self, num_bodies: int, shape: tuple[int, ...]) -> None:
        self.chunks: list[tuple[np.ndarray, ...]] = []  # (obs, action, reward, next_obs, next_action, known, terminal)
        self.rows = 0
        self.obs = np.zeros((num_bodies,) + shape, np.float32)
        self.action = np.zeros(num_bodies, np.int64)
        self.reward = np.zeros(num_bodies, np.float32)
        self.waiting = np.zeros(num_bodies, bool)

    def push(self, *arrays: np.ndarray) -> None:
        if len(arrays[0]):
            self.chunks.append(arrays)
            self.rows += len(arrays[0])

    def take(self) -> tuple[np.ndarray, ...]:
        batch = tuple(np.concatenate(parts) for parts in zip(*self.chunks))
        self.chunks, self.rows = [], 0
        return batch


class SARSA(Algorithm):
    """SARSA for Discrete actions; one (hydra) Q-net, no target net: the next action's value comes from the net itself."""

    Config = SARSAConfig
    action_spaces: ClassVar[tuple[type[gym.Space], ...]] = (gym.spaces.Discrete,)
    memory_names: ClassVar[tuple[str, ...]] = ("OnPolicyBatch",)
    default_net: ClassVar[str | None] = "MLP"
    takes_masks: ClassVar[bool] = False

    @classmethod
    def action_problem(cls, space: gym.Space) -> str | None:
        """Discrete actions that start at 0."""
        return super().action_problem(space) or zero_based_problem(cls.__name__, space)

    def __init__(self, config: SARSAConfig, ctx: AgentContext) -> None:
        super().__init__(config, ctx)
        self.check_groups()
        _, net_cls, net_cfg = resolve_component(ctx.net, NETS, self.default_net)
        _, _, mem_cfg = resolve_component(ctx.memory, MEMORIES, self.memory_to_build(ctx.memory))
        self.n_steps = mem_cfg.n_steps
        self.device = resolve_device(net_cfg)
        torch.manual_seed(ctx.seed)
        self.rng = np.random.default_rng(ctx.seed)
        self.sig_of, sigs = group_signatures(self.groups)
        self.q_net = build_net(net_cls, net_cfg, [o for o, _ in sigs], [[discrete_n(a)] for _, a in sigs],
                               [1.0]).to(self.device)
        self.optim = Optim(self.q_net.parameters(), net_cfg.optim, net_cfg.clip_grad_norm)
        self.obs_norms = [ObsNormalizer(obs_shape(g.observation_space)) if config.normalize_obs else None
                          for g in self.groups]
        self.rows = [_Rows(g.num_bodies, obs_shape(g.observation_space)) for g in self.groups]

    def _tensor(self, x: np.ndarray) -> torch.Tensor:
        return to_tensor(x, self.device)

    def act(self, group: int, obs: np.ndarray, mask: np.ndarray | None = None,
            acting: np.ndarray | None = None) -> np.ndarray:
        """Exploring actions while training, greedy otherwise; an acting body's waiting transition takes the action
        as its a' (and these obs as its s')."""
        x = prepare_obs(obs, self.obs_norms[group], update=self.training, rows=acting)
        with torch.no_grad():
            q = self.q_net(self._tensor(x), self.sig_of[group])[0]
        if not self.training:
            return q.argmax(dim=1).cpu().numpy()
        action = explore(q, self.config, self.frame, self.rng)
        rows = self.rows[group]
        done = rows.waiting & (True if acting is None else acting)
        if done.any():
            n = int(done.sum())
            rows.push(rows.obs[done].copy(), rows.action[done].copy(), rows.reward[done].copy(),
                      np.asarray(x[done], np.float32), action[done], np.ones(n, bool), np.zeros(n, bool))
            rows.waiting[done] = False
        return action

    def update(self, group: int, transition: Transition) -> None:
        """Keep each acting body's step until its next action; an episode's last step is finished at once (a time
        limit's with no next action); a round once the group has n_steps transitions a body."""
        super().update(group, transition)
        if not self.training:
            return
        t, rows = transition, self.rows[group]
        body = np.ones(len(t.reward), bool) if t.completed is None else np.asarray(t.completed, bool)
        norm = self.obs_norms[group]
        obs = prepare_obs(t.obs, norm, False).astype(np.float32, copy=False)
        ended = body & (t.terminated | t.truncated)
        if ended.any():
            n = int(ended.sum())
            final = prepare_obs(t.bootstrap_obs()[ended], norm, False).astype(np.float32, copy=False)
            rows.push(obs[ended], t.action[ended].astype(np.int64), t.reward[ended].astype(np.float32), final,
                      np.zeros(n, np.int64), np.zeros(n, bool), np.asarray(t.terminated, bool)[ended])
        keep = body & ~ended
        rows.obs[keep], rows.action[keep], rows.reward[keep] = obs[keep], t.action[keep], t.reward[keep]
        rows.waiting[keep] = True
        if rows.rows >= self.n_steps * self.groups[group].num_bodies:
            self.train(group)

    def group_finished(self, group: int) -> None:
        """Drop the group's unfinished transitions."""
        self.rows[group].waiting[:] = False

    def _expected(self, q: torch.Tensor) -> torch.Tensor:
        """Each row's expected Q under the exploring policy (for a' never taken)."""
        cfg = self.config
        if cfg.explore == "epsilon_greedy":
            eps = value_at(cfg.epsilon, self.frame)
            return (1.0 - eps) * q.max(dim=1).values + eps * q.mean(dim=1)
        temperature = value_at(cfg.temperature, self.frame)
        if temperature <= 0.0:
            return q.max(dim=1).values
        return (torch.softmax(q / temperature, dim=1) * q).sum(dim=1)

    def train(self, group: int) -> None:
        """`gradient_steps` steps on the group's finished transitions toward r + gamma * Q(s', a')."""
        obs, action, reward, next_obs, next_action, known, terminal = (self._tensor(a) for a in self.rows[group].take())
        sig = self.sig_of[group]
        self.optim.set_frame(self.frame)
        with torch.no_grad():
            next_q = self.q_net(next_obs, sig)[0]
            boot = torch.where(known, next_q.gather(1, next_action.unsqueeze(1)).squeeze(1), self._expected(next_q))
            target = reward + self.config.gamma * (1.0 - terminal.float()) * boot
        loss_fn = F.smooth_l1_loss if self.config.loss == "huber" else F.mse_loss
        for _ in range(self.config.gradient_steps):
            q = self.q_net(obs, sig)[0].gather(1, action.unsqueeze(1)).squeeze(1)
            loss = loss_fn(q, target)
            norm = self.optim.step(loss)
            self.opt_step += 1
        self.last_loss = float(loss.detach())
        stat, value = explore_stat(self.config, self.frame)
        self.stats.report(self.frame, {"train/loss": self.last_loss, "train/q_mean": float(q.detach().mean()),
                                       stat: value, "train/lr": self.optim.lr, "train/grad_norm": norm})

    def state_dict(self) -> dict[str, Any]:
        """Q-net, optimiser, normalisers, generator, frame and opt_step (unfinished transitions are not kept)."""
        state = super().state_dict()
        state.update(q_net=self.q_net.state_dict(), optim=self.optim.state_dict(), rng=self.rng.bit_generator.state,
                     obs_norms=[n.state_dict() if n else None for n in self.obs_norms])
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.q_net.load_state_dict(state["q_net"])
        self.optim.load_state_dict(state["optim"])
        self.rng.bit_generator.state = state["rng"]
        for n, s in zip(self.obs_norms, state["obs_norms"]):
            if n is not None and s is not None:
                n.load_state_dict(s)
