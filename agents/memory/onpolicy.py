"""OnPolicyBatch: a preallocated (n_steps, bodies) rollout buffer for REINFORCE, A2C and PPO."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import DTypeLike



@dataclass
class OnPolicyBatchConfig:
    """`n_steps`: steps per body collected before each training round (rollout = n_steps x bodies frames)."""

    n_steps: int = field(default=128, metadata={"min": 1})


class OnPolicyBatch:
    """Rollout of one group: obs, actions, rewards, dones, values and log-probs, each (n_steps, bodies, ...)."""

    Config = OnPolicyBatchConfig

    def __init__(self, config: OnPolicyBatchConfig, num_bodies: int, obs_shape: tuple[int, ...],
                 act_shape: tuple[int, ...], act_dtype: DTypeLike, obs_dtype: DTypeLike = np.float32) -> None:
        self.n_steps = config.n_steps
        T, N = config.n_steps, num_bodies
        self.obs = np.zeros((T, N) + tuple(obs_shape), obs_dtype)
        self.actions = np.zeros((T, N) + tuple(act_shape), act_dtype)
        self.rewards = np.zeros((T, N), np.float32)
        self.dones = np.zeros((T, N), bool)
        self.values = np.zeros((T, N), np.float32)
        self.logps = np.zeros((T, N), np.float32)
        self.last_obs = np.zeros((N,) + tuple(obs_shape), obs_dtype)
        self.valid: np.ndarray | None = None
        self.masks: np.ndarray | None = None
        self.states: np.ndarray | None = None
        self.starts: np.ndarray | None = None
        self.pos = 0

    def add_extras(self, turns: bool, mask_width: int | None) -> None:
        """Also keep which rows hold a transition (turn-based envs) and the legal-action masks at obs."""
        T, N = self.rewards.shape
        self.valid = np.zeros((T, N), bool) if turns else None
        self.masks = np.zeros((T, N, mask_width), bool) if mask_width is not None else None

    def add_states(self, size: int) -> None:
        """Also keep a recurrent policy's state before each row's step (bodies, size) and where an episode starts."""
        T, N = self.rewards.shape
        self.states = np.zeros((T, N, size), np.float32)
        self.starts = np.zeros((T, N), bool)

    @property
    def full(self) -> bool:
        return self.pos == self.n_steps

    def add(self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray, done: np.ndarray,
            value: np.ndarray, logp: np.ndarray, next_obs: np.ndarray, valid: np.ndarray | None = None,
            mask: np.ndarray | None = None, state: np.ndarray | None = None, start: np.ndarray | None = None) -> None:
        """Copy one step of every body in; `next_obs` is kept for bootstrapping the rollout's end; `valid` and
        `mask` are stored where add_extras asked for them, `state` and `start` where add_states did."""
        if self.full:
            raise RuntimeError("OnPolicyBatch is full; train and reset it before adding more")
        t = self.pos
        self.obs[t] = obs
        self.actions[t] = action
        self.rewards[t] = reward
        self.dones[t] = done
        self.values[t] = value
        self.logps[t] = logp
        self.last_obs[:] = next_obs
        if self.valid is not None:
            self.valid[t] = True if valid is None else valid
        if self.masks is not None and mask is not None:
            self.masks[t] = mask
        if self.states is not None and self.starts is not None and state is not None and start is not None:
            self.states[t] = state
            self.starts[t] = start
        self.pos += 1

    def reset(self) -> None:
        """Empty the buffer (arrays are reused)."""
        self.pos = 0
