"""Returns, advantages and losses as pure functions, so each can be checked against a hand computation.

Array convention: rollout arrays are (T, N) = (steps, bodies). `dones[t]` is True when the episode of a
body ended at step t (terminated or truncated); rewards of truncated steps already carry the bootstrap
term gamma * V(final_obs) (see `bootstrap_truncated`), so a done always cuts the recursion.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def bootstrap_truncated(rewards: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
                        final_values: np.ndarray, gamma: float) -> np.ndarray:
    """Rewards with gamma * V(final_obs) added where an episode was cut by a time limit but not terminated."""
    cut = truncated & ~terminated
    return rewards + gamma * final_values * cut


def gae(rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, last_values: np.ndarray,
        gamma: float, lam: float, valid: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimates and the value targets (advantages + values), both (T, N).

    With `valid` (T, N), steps where a body holds no transition (turn-based games) are passed over: the
    recursion links each body's transitions to each other only (entries at invalid steps are meaningless).
    """
    T = rewards.shape[0]
    adv = np.empty_like(rewards, dtype=np.float32)
    not_done = 1.0 - dones.astype(np.float32)
    last = np.zeros_like(last_values, dtype=np.float32)
    next_values = last_values
    for t in range(T - 1, -1, -1):
        delta = rewards[t] + gamma * next_values * not_done[t] - values[t]
        if valid is None:
            last = delta + gamma * lam * not_done[t] * last
            next_values = values[t]
        else:
            last = np.where(valid[t], delta + gamma * lam * not_done[t] * last, last)
            next_values = np.where(valid[t], values[t], next_values)
        adv[t] = last
    return adv, adv + values


def nstep_returns(rewards: np.ndarray, dones: np.ndarray, last_values: np.ndarray, gamma: float,
                  valid: np.ndarray | None = None) -> np.ndarray:
    """Discounted returns to the end of the rollout, bootstrapped with `last_values` where no episode ended;
    steps outside `valid` (T, N) are passed over, as in `gae`."""
    ret = np.empty_like(rewards, dtype=np.float32)
    not_done = 1.0 - dones.astype(np.float32)
    running = last_values.astype(np.float32)
    for t in range(rewards.shape[0] - 1, -1, -1):
        step = rewards[t] + gamma * not_done[t] * running
        running = step if valid is None else np.where(valid[t], step, running)
        ret[t] = running
    return ret


def ppo_clip_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                  clip: float) -> torch.Tensor:
    """PPO's clipped surrogate loss, to minimise: -mean(min(ratio * A, clip(ratio, 1-eps, 1+eps) * A))."""
    ratio = torch.exp(logp - old_logp)
    return -torch.min(ratio * advantages, torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * advantages).mean()


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
               clip: float | None) -> torch.Tensor:
    """Mean squared value error; with `clip`, PPO's pessimistic clipped variant around the old values."""
    if clip is None:
        return F.mse_loss(values, returns)
    clipped = old_values + torch.clamp(values - old_values, -clip, clip)
    return torch.max((values - returns) ** 2, (clipped - returns) ** 2).mean()


def dqn_target(next_q_target: torch.Tensor, rewards: torch.Tensor, terminated: torch.Tensor,
               gamma: float | torch.Tensor) -> torch.Tensor:
    """DQN target r + gamma * max_a Q_target(s', a), cut where the episode terminated (`gamma` one, or per sample)."""
    return rewards + gamma * (1.0 - terminated) * next_q_target.max(dim=1).values


def double_dqn_target(next_q_online: torch.Tensor, next_q_target: torch.Tensor, rewards: torch.Tensor,
                      terminated: torch.Tensor, gamma: float | torch.Tensor) -> torch.Tensor:
    """DoubleDQN target: the online net picks a' = argmax Q_online(s'), the target net values it."""
    best = next_q_online.argmax(dim=1, keepdim=True)
    return rewards + gamma * (1.0 - terminated) * next_q_target.gather(1, best).squeeze(1)
