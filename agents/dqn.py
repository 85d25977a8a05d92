"""DQN and DoubleDQN: Q-learning from replay with a target net (replacement or polyak), epsilon/Boltzmann exploration."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from slm_lab_like.agents.base import AgentContext, Algorithm, Transition, discrete_n
from slm_lab_like.agents.common import (build_net, group_signatures, obs_shape, prepare_obs, stored_obs_dtype, to_tensor,
                           zero_based_problem)
from slm_lab_like.agents.config import resolve_component
from slm_lab_like.agents.explore import explore, explore_stat, masked
from slm_lab_like.agents.losses import double_dqn_target, dqn_target
from slm_lab_like.agents.memory.replay import NStepAccumulator, Replay, ReplayBatch
from slm_lab_like.agents.net.base import Optim, resolve_device
from slm_lab_like.agents.normalizer import ObsNormalizer
from slm_lab_like.agents.registry import MEMORIES, NETS
from slm_lab_like.agents.schedule import Schedule


@dataclass
class DQNConfig:
    """DQN hyperparameters. Frequencies: `train_freq` in agent frames (all bodies), `target_update_freq` in
    optimiser steps; `gradient_steps` optimiser steps per training round, each on a fresh batch, or with
    `batch_reuse` k on each sampled batch for k steps in a row (SLM Lab's training_batch_iter). `n_step`: the replay holds n-step
    returns of each body's own stream (cut at episode ends, bootstrapped on truncation) with target
    R + gamma^k max_a Q(s_{t+k}, a), k <= n."""

    gamma: float = field(default=0.99, metadata={"min": 0.0, "max": 1.0})
    n_step: int = field(default=1, metadata={"min": 1})
    explore: Literal["epsilon_greedy", "boltzmann"] = "epsilon_greedy"
    epsilon: float | Schedule = field(default_factory=lambda: Schedule(name="linear", start=1.0, end=0.05, frames=10000),
                                      metadata={"min": 0.0, "max": 1.0})
    temperature: float | Schedule = field(default=1.0, metadata={"min": 0.0})
    learning_starts: int = field(default=1000, metadata={"min": 0})
    train_freq: int = field(default=4, metadata={"min": 1})
    gradient_steps: int = field(default=1, metadata={"min": 1})
    target_update: Literal["replace", "polyak"] = "replace"
    target_update_freq: int = field(default=500, metadata={"min": 1})
    polyak_coef: float = field(default=0.005, metadata={"min": 0.0, "max": 1.0})
    loss: Literal["huber", "mse"] = "huber"
    double: bool = False
    batch_reuse: int = field(default=1, metadata={"min": 1})
    normalize_obs: bool = False


@dataclass
class DoubleDQNConfig(DQNConfig):
    """DQN's config with `double` on: the online net selects the next action, the target net values it."""

    double: bool = True


class DQN(Algorithm):
    """Deep Q-Network (Mnih et al. 2015) for Discrete actions; one replay memory per group, one (hydra) Q-net."""

    Config = DQNConfig
    action_spaces: ClassVar[tuple[type[gym.Space], ...]] = (gym.spaces.Discrete,)
    memory_names: ClassVar[tuple[str, ...]] = ("Replay", "PrioritizedReplay")
    default_net: ClassVar[str | None] = "MLP"

    @classmethod
    def action_problem(cls, space: gym.Space) -> str | None:
        """Discrete actions that start at 0."""
        return super().action_problem(space) or zero_based_problem(cls.__name__, space)

    def __init__(self, config: DQNConfig, ctx: AgentContext) -> None:
        super().__init__(config, ctx)
        self.check_groups()
        _, net_cls, net_cfg = resolve_component(ctx.net, NETS, self.default_net)
        _, mem_cls, mem_cfg = resolve_component(ctx.memory, MEMORIES, self.memory_to_build(ctx.memory))
        self.device = resolve_device(net_cfg)
        torch.manual_seed(ctx.seed)
        self.rng = np.random.default_rng(ctx.seed)
        self.sig_of, sigs = group_signatures(self.groups)
        self.q_net = build_net(net_cls, net_cfg, [o for o, _ in sigs],
                               [[discrete_n(a)] for _, a in sigs], [1.0]).to(self.device)
        self.target_net = copy.deepcopy(self.q_net)
        self.target_net.requires_grad_(False)
        self.q_params, self.target_params = list(self.q_net.parameters()), list(self.target_net.parameters())
        self.optim = Optim(self.q_net.parameters(), net_cfg.optim, net_cfg.clip_grad_norm)
        self.obs_norms = [ObsNormalizer(obs_shape(g.observation_space)) if config.normalize_obs else None
                          for g in self.groups]
        self.memories: list[Replay] = [
            mem_cls(mem_cfg, g.num_bodies, obs_shape(g.observation_space),
                    stored_obs_dtype(g.observation_space, config.normalize_obs), (), np.int64, ctx.seed + i)
            for i, g in enumerate(self.groups)]
        self.nsteps: list[NStepAccumulator | None] = [
            NStepAccumulator(config.n_step, config.gamma, g.num_bodies, obs_shape(g.observation_space),
                             stored_obs_dtype(g.observation_space, config.normalize_obs))
            if config.n_step > 1 else None for g in self.groups]
        self.next_train_frame = max(config.learning_starts, config.train_freq)

    def _tensor(self, x: np.ndarray) -> torch.Tensor:
        return to_tensor(x, self.device)

    def act(self, group: int, obs: np.ndarray, mask: np.ndarray | None = None,
            acting: np.ndarray | None = None) -> np.ndarray:
        """Exploring actions while training (epsilon-greedy or Boltzmann), greedy otherwise; legal ones only
        where the env gives legal-action masks."""
        x = self._tensor(prepare_obs(obs, self.obs_norms[group], update=self.training, rows=acting))
        with torch.no_grad():
            q = self.q_net(x, self.sig_of[group])[0]
        if mask is not None:
            q = masked(q, mask)
        if not self.training:
            return q.argmax(dim=1).cpu().numpy()
        return explore(q, self.config, self.frame, self.rng, mask)

    def update(self, group: int, transition: Transition) -> None:
        """Store the step (with the true next obs; only the rows of Transition.completed in turn-based envs) and
        run a training round every `train_freq` frames."""
        super().update(group, transition)
        if not self.training:
            return
        norm = self.obs_norms[group]
        t = transition
        obs, action, reward, next_obs, term = t.obs, t.action, t.reward, t.bootstrap_obs(), t.terminated
        trunc = t.truncated
        next_mask = t.bootstrap_action_mask()
        if t.completed is not None:
            rows = t.completed
            obs, action, reward, next_obs, term = obs[rows], action[rows], reward[rows], next_obs[rows], term[rows]
            trunc = trunc[rows]
            next_mask = None if next_mask is None else next_mask[rows]
        obs, next_obs = prepare_obs(obs, norm, False), prepare_obs(next_obs, norm, False)
        nstep = self.nsteps[group]
        if nstep is None:
            self.memories[group].add(obs, action, reward, next_obs, term, next_mask)
        else:
            bodies = None if t.completed is None else np.flatnonzero(t.completed)
            r = nstep.add(obs, action, reward, next_obs, term, trunc, next_mask, bodies)
            if len(r.rewards):
                self.memories[group].add(r.obs, r.actions, r.rewards, r.next_obs, r.terminated, r.next_mask,
                                         r.discounts)
        if self.frame >= self.next_train_frame and any(len(m) for m in self.memories):
            self.next_train_frame = self.frame + self.config.train_freq
            self.train()

    def group_finished(self, group: int) -> None:
        """Drop the group's unfinished n-step transitions."""
        nstep = self.nsteps[group]
        if nstep is not None:
            nstep.reset()

    def train(self) -> None:
        """`gradient_steps` optimiser steps, each on one batch from every group's replay that holds transitions
        (none yet while n-step returns are still accumulating: then nothing to learn from), a fresh batch every
        `batch_reuse` steps."""
        cfg = self.config
        mems = [(g, m) for g, m in enumerate(self.memories) if len(m) > 0]
        if not mems:
            return
        self.optim.set_frame(self.frame)
        batches: list[ReplayBatch] = []
        for step in range(cfg.gradient_steps):
            if cfg.target_update == "replace" and self.opt_step % cfg.target_update_freq == 0:
                self.target_net.load_state_dict(self.q_net.state_dict())
            loss = torch.zeros((), device=self.device)
            q_td = torch.zeros(2, device=self.device)
            if step % cfg.batch_reuse == 0:
                batches = [mem.sample(self.frame) for _, mem in mems]
            for (g, mem), batch in zip(mems, batches):
                group_loss, group_q_td = self._group_loss(self.sig_of[g], mem, batch)
                loss = loss + group_loss
                q_td = q_td + group_q_td
            loss = loss / len(mems)
            norm = self.optim.step(loss)
            self.opt_step += 1
            if cfg.target_update == "polyak":
                with torch.no_grad():
                    torch._foreach_lerp_(self.target_params, self.q_params, cfg.polyak_coef)
        self.last_loss = float(loss.detach())
        q_mean, td_error = (q_td / len(mems)).tolist()
        stat, value = explore_stat(cfg, self.frame)
        self.stats.report(self.frame, {
            "train/loss": self.last_loss, "train/q_mean": q_mean, "train/td_error": td_error, stat: value,
            "train/lr": self.optim.lr, "train/grad_norm": norm})

    def _group_loss(self, sig: int, mem: Replay, b: ReplayBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """TD loss of one sampled batch (importance-weighted; priorities refreshed for prioritized replay), and
        (mean Q of the taken actions, mean |TD error|) for the stats."""
        obs, next_obs = self._tensor(b.obs), self._tensor(b.next_obs)
        rewards, term = self._tensor(b.rewards), self._tensor(b.terminated)
        gamma = self.config.gamma if b.discounts is None else self._tensor(b.discounts)
        with torch.no_grad():
            next_q_target = self.target_net(next_obs, sig)[0]
            next_q_online = self.q_net(next_obs, sig)[0] if self.config.double else None
            if b.next_mask is not None:
                next_q_target = masked(next_q_target, b.next_mask)
                next_q_online = None if next_q_online is None else masked(next_q_online, b.next_mask)
            if next_q_online is not None:
                target = double_dqn_target(next_q_online, next_q_target, rewards, term, gamma)
            else:
                target = dqn_target(next_q_target, rewards, term, gamma)
        q = self.q_net(obs, sig)[0].gather(1, self._tensor(b.actions).unsqueeze(1)).squeeze(1)
        if self.config.loss == "huber":
            per_sample = F.smooth_l1_loss(q, target, reduction="none")
        else:
            per_sample = F.mse_loss(q, target, reduction="none")
        td = (q - target).detach()
        q_td = torch.stack([q.detach().mean(), td.abs().mean()])
        if type(mem) is not Replay:
            mem.update_priorities(b.indices, td.cpu().numpy())
            return (per_sample * self._tensor(b.weights)).mean(), q_td
        return per_sample.mean(), q_td

    def state_dict(self) -> dict[str, Any]:
        """Q-net, target net, optimiser, normalisers, frame and opt_step (schedules follow frame)."""
        state = super().state_dict()
        state.update(q_net=self.q_net.state_dict(), target_net=self.target_net.state_dict(),
                     optim=self.optim.state_dict(), next_train_frame=self.next_train_frame,
                     rng=self.rng.bit_generator.state,
                     obs_norms=[n.state_dict() if n else None for n in self.obs_norms])
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state_dict (the replay memory starts empty)."""
        super().load_state_dict(state)
        self.q_net.load_state_dict(state["q_net"])
        self.target_net.load_state_dict(state["target_net"])
        self.optim.load_state_dict(state["optim"])
        self.next_train_frame = int(state["next_train_frame"])
        if "rng" in state:
            self.rng.bit_generator.state = state["rng"]
        for n, s in zip(self.obs_norms, state["obs_norms"]):
            if n is not None and s is not None:
                n.load_state_dict(s)

    def memory_state_dict(self) -> dict[str, Any]:
        """Every group's replay memory."""
        return {"replay": [m.state_dict() for m in self.memories]}

    def load_memory_state_dict(self, state: dict[str, Any]) -> None:
        """Restore every group's replay memory (unfinished n-step transitions are not kept)."""
        for m, s in zip(self.memories, state["replay"]):
            m.load_state_dict(s)


class DoubleDQN(DQN):
    """DoubleDQN (van Hasselt et al. 2016): DQN with decoupled action selection and evaluation."""

    Config = DoubleDQNConfig
