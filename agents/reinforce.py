"""REINFORCE: Monte-Carlo policy gradient with a baseline (learned critic, batch mean, or none)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F

from slm_lab_like.agents.base import AgentContext
from slm_lab_like.agents.losses import nstep_returns
from slm_lab_like.agents.memory.onpolicy import OnPolicyBatch
from slm_lab_like.agents.onpolicy import OnPolicyAlgorithm, OnPolicyConfig, Rollout
from slm_lab_like.agents.schedule import value_at


@dataclass
class REINFORCEConfig(OnPolicyConfig):
    """`baseline`: "critic" (a learned V(s), which also bootstraps time-limit cuts and rollout ends),
    "mean" (the batch's mean return) or "none". `through_truncation` (no critic only): a return runs on through a
    time-limit truncation into the body's next episode, as SLM Lab's does, instead of ending there: with no critic
    to bootstrap the cut state, the next episode's return stands in for its value."""

    baseline: Literal["critic", "mean", "none"] = "critic"
    through_truncation: bool = False


class REINFORCE(OnPolicyAlgorithm):
    """Williams' REINFORCE on discounted reward-to-go, one gradient step per rollout."""

    Config = REINFORCEConfig

    @classmethod
    def has_separate_critic(cls, config: Any, net_config: Any) -> bool:
        """A critic net apart from the actor's: the critic baseline with a net not shared."""
        return config.baseline == "critic" and not net_config.shared

    @classmethod
    def config_problem(cls, config: Any) -> tuple[str, str] | None:
        """A return run through a truncation needs no critic to bootstrap it."""
        if config.through_truncation and config.baseline == "critic":
            return "through_truncation", 'true with baseline "critic", which bootstraps the cut state; choose one'
        if config.value_norm and config.baseline != "critic":
            return "value_norm", f'true with baseline "{config.baseline}": there is no critic to normalise'
        return super().config_problem(config)

    def __init__(self, config: REINFORCEConfig, ctx: AgentContext) -> None:
        self.uses_critic = config.baseline == "critic"
        self.through_truncation = config.through_truncation
        super().__init__(config, ctx)

    def advantages(self, mem: OnPolicyBatch, last_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Discounted returns to go, minus the baseline."""
        ret = nstep_returns(mem.rewards, mem.dones, last_values, self.config.gamma, mem.valid)
        if self.config.baseline == "critic":
            return ret - mem.values, ret
        if self.config.baseline == "mean":
            acted = ret if mem.valid is None else ret[mem.valid]  # rows where a body waited its turn are not samples
            return ret - (acted.mean() if acted.size else 0.0), ret
        return ret.copy(), ret

    def learn(self, rollouts: list[Rollout]) -> None:
        """One step on -log pi(a|s) * advantage (+ the critic's value loss) - entropy bonus."""
        ent_coef = value_at(self.config.entropy_coef, self.frame)
        parts = torch.zeros(3, device=self.device)  # policy, value (0 without a critic) and entropy terms
        for r in rollouts:
            logp, entropy, v = self.policy.evaluate(r.obs, r.actions, r.sig, mask=r.masks, seq=r.seq)
            value = F.mse_loss(v, r.returns) if v is not None else torch.zeros((), device=self.device)
            parts = parts + torch.stack([-(logp * self._normalize(r.advantages)).mean(), value, entropy.mean()])
        parts = parts / len(rollouts)
        loss = parts[0] + self.config.val_loss_coef * parts[1] - ent_coef * parts[2]
        norm = self.optim.step(loss)
        self.opt_step += 1
        self.last_loss = float(loss.detach())
        policy, value, entropy = parts.detach().tolist()
        report = {"train/loss": self.last_loss, "train/policy_loss": policy, "train/entropy": entropy,
                  "train/lr": self.optim.lr, "train/grad_norm": norm}
        if self.uses_critic:
            report.update({"train/value_loss": value, "train/explained_variance": self.explained_variance(rollouts)})
        self.stats.report(self.frame, report)
