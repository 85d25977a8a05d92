"""PPO: clipped surrogate objective on GAE advantages, several epochs of minibatches per rollout."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from slm_lab_like.agents.losses import gae, ppo_clip_loss, value_loss
from slm_lab_like.agents.memory.onpolicy import OnPolicyBatch
from slm_lab_like.agents.onpolicy import OnPolicyAlgorithm, OnPolicyConfig, Rollout
from slm_lab_like.agents.schedule import Schedule, value_at


@dataclass
class PPOConfig(OnPolicyConfig):
    """PPO hyperparameters; clip_eps and entropy_coef may be schedules; clip_vf turns on value clipping;
    `critic`: "own" (each body's critic sees its own observation) or "central" (MAPPO-style: the critic sees the
    joint observation of every body of the env and learns the team's return; see agents.critic); `critic_input`:
    what a central critic takes ("all", "all_own" or "pooled"; agents.critic); `critic_team`: whose reward it learns
    ("env": every body of the env, a cooperative game; "agent": this agent's bodies in the env, a side of a mixed
    or competitive one)."""

    lam: float = field(default=0.95, metadata={"min": 0.0, "max": 1.0})
    clip_eps: float | Schedule = field(default=0.2, metadata={"min": 0.0})
    clip_vf: float | None = field(default=None, metadata={"min": 0.0})
    n_epochs: int = field(default=10, metadata={"min": 1})
    minibatch_size: int = field(default=64, metadata={"min": 1})
    target_kl: float | None = field(default=None, metadata={"min": 0.0})
    critic: Literal["own", "central"] = "own"
    critic_input: Literal["all", "all_own", "pooled"] = "all"
    critic_team: Literal["env", "agent"] = "env"


class PPO(OnPolicyAlgorithm):
    """Proximal Policy Optimization (Schulman et al. 2017) for Discrete, Box, MultiDiscrete and MultiBinary actions."""

    Config = PPOConfig

    def advantages(self, mem: OnPolicyBatch, last_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """GAE(lambda) advantages and returns."""
        return gae(mem.rewards, mem.values, mem.dones, last_values, self.config.gamma, self.config.lam, mem.valid)

    def learn(self, rollouts: list[Rollout]) -> None:
        """n_epochs passes of shuffled minibatches; groups step together, one minibatch of each per step. A rollout
        of n rows is split into ceil(n / minibatch_size) near-equal minibatches (a rollout with rows that hold no
        transition, e.g. a NEXT_STEP reset step, has fewer rows: it keeps its number of minibatches).

        Advantages are normalised per minibatch; a whole-rollout minibatch is neither shuffled nor re-indexed. A
        recurrent policy's minibatches are sets of whole sequences (as many minibatches as rows call for, at most one
        a sequence), each unrolled from its stored state.
        """
        cfg = self.config
        clip = value_at(cfg.clip_eps, self.frame)
        ent_coef = value_at(cfg.entropy_coef, self.frame)
        sizes = [len(r.returns) for r in rollouts]
        n_mb = max(1, max(-(-n // cfg.minibatch_size) for n in sizes))  # no minibatch over the size, as in SB3
        if rollouts[0].seq is not None:
            n_mb = min(n_mb, min(r.sequences for r in rollouts))
            sizes = [r.sequences for r in rollouts]
        if n_mb == 1:
            rollouts = [r._replace(advantages=self._normalize(r.advantages)) for r in rollouts]
        loss = torch.zeros(())
        tally = torch.zeros(6, device=self.device)  # policy, value, entropy, approx kl, clip fraction, grad norm
        steps = 0
        for _ in range(cfg.n_epochs):
            splits = [torch.tensor_split(torch.randperm(n, generator=self.gen, device=self.device), n_mb)
                      if n_mb > 1 else None for n in sizes]
            stop = False
            for k in range(n_mb):
                loss = torch.zeros((), device=self.device)
                for r, split in zip(rollouts, splits):
                    if split is None:
                        mb = r
                    elif r.seq is not None:
                        mb = r.columns(split[k])
                        mb = mb._replace(advantages=self._normalize(mb.advantages))
                    else:
                        idx = split[k]
                        mb = r.rows(idx, self._normalize(r.advantages.index_select(0, idx)))
                    logp, entropy, v = self.policy.evaluate(mb.obs, mb.actions, mb.sig, True, mb.masks,
                                                            mb.critic_obs, mb.csig, mb.seq)
                    pg = ppo_clip_loss(logp, mb.logps, mb.advantages, clip)
                    vl = (value_loss(v, mb.values, mb.returns, cfg.clip_vf) if v is not None
                          else torch.zeros((), device=self.device))
                    loss = loss + pg + cfg.val_loss_coef * vl - ent_coef * entropy.mean()
                    with torch.no_grad():
                        log_ratio = logp - mb.logps
                        kl = (log_ratio.exp() - 1 - log_ratio).mean()
                        clipped = ((log_ratio.exp() - 1).abs() > clip).float().mean()
                        tally[:5] += torch.stack([pg, vl, entropy.mean(), kl, clipped]) / len(rollouts)
                    if cfg.target_kl is not None:
                        stop = stop or float(kl) > 1.5 * cfg.target_kl
                loss = loss / len(rollouts)
                tally[5] += self.optim.step(loss)
                self.opt_step += 1
                steps += 1
            if stop:
                break
        self.last_loss = float(loss.detach())
        policy, value, entropy, kl, clipped, norm = (tally / steps).tolist()
        self.stats.report(self.frame, {
            "train/loss": self.last_loss, "train/policy_loss": policy, "train/value_loss": value,
            "train/entropy": entropy, "train/approx_kl": kl, "train/clip_fraction": clipped,
            "train/explained_variance": self.explained_variance(rollouts), "train/lr": self.optim.lr,
            "train/grad_norm": norm, "train/clip_range": clip})
