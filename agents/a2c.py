"""A2C: synchronous advantage actor-critic, one gradient step per rollout, n-step or GAE advantages."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

from slm_lab_like.agents.losses import gae, nstep_returns
from slm_lab_like.agents.memory.onpolicy import OnPolicyBatch
from slm_lab_like.agents.onpolicy import OnPolicyAlgorithm, OnPolicyConfig, Rollout
from slm_lab_like.agents.schedule import value_at


@dataclass
class A2CConfig(OnPolicyConfig):
    """`advantage`: "nstep" (bootstrapped n-step returns minus V) or "gae" with `lam`; `critic`: "own" or
    "central" (the critic sees the joint observation of every body of the env; see agents.critic); `critic_input`:
    what a central critic takes ("all", "all_own" or "pooled"; agents.critic); `critic_team`: whose reward it learns
    ("env" or "agent"; agents.critic)."""

    advantage: Literal["nstep", "gae"] = "gae"
    lam: float = field(default=0.95, metadata={"min": 0.0, "max": 1.0})
    normalize_advantage: bool = False
    critic: Literal["own", "central"] = "own"
    critic_input: Literal["all", "all_own", "pooled"] = "all"
    critic_team: Literal["env", "agent"] = "env"


class A2C(OnPolicyAlgorithm):
    """A2C (Mnih et al. 2016, synchronous advantage actor-critic) for Discrete, Box, MultiDiscrete and MultiBinary."""

    Config = A2CConfig

    def advantages(self, mem: OnPolicyBatch, last_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """n-step or GAE advantages and their value targets."""
        cfg = self.config
        if cfg.advantage == "gae":
            return gae(mem.rewards, mem.values, mem.dones, last_values, cfg.gamma, cfg.lam, mem.valid)
        ret = nstep_returns(mem.rewards, mem.dones, last_values, cfg.gamma, mem.valid)
        return ret - mem.values, ret

    def learn(self, rollouts: list[Rollout]) -> None:
        """One step on policy-gradient + value + entropy losses over every group's rollout."""
        ent_coef = value_at(self.config.entropy_coef, self.frame)
        parts = torch.zeros(3, device=self.device)  # policy, value and entropy terms, summed over groups
        for r in rollouts:
            logp, entropy, v = self.policy.evaluate(r.obs, r.actions, r.sig, mask=r.masks, critic_x=r.critic_obs,
                                                    csig=r.csig, seq=r.seq)
            assert v is not None  # A2C's policy always has a critic
            parts = parts + torch.stack([-(logp * self._normalize(r.advantages)).mean(), F.mse_loss(v, r.returns),
                                         entropy.mean()])
        parts = parts / len(rollouts)
        loss = parts[0] + self.config.val_loss_coef * parts[1] - ent_coef * parts[2]
        norm = self.optim.step(loss)
        self.opt_step += 1
        self.last_loss = float(loss.detach())
        policy, value, entropy = parts.detach().tolist()
        self.stats.report(self.frame, {
            "train/loss": self.last_loss, "train/policy_loss": policy, "train/value_loss": value,
            "train/entropy": entropy, "train/explained_variance": self.explained_variance(rollouts),
            "train/lr": self.optim.lr, "train/grad_norm": norm})
