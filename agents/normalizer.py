"""Running normalisers for observations and rewards, with state for checkpoints."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch


class RunningMeanStd:
    """Running mean and variance over a stream of batches (Chan et al.'s parallel update)."""

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4) -> None:
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = epsilon

    def update(self, x: np.ndarray) -> None:
        """Fold a batch (first axis: samples) into the running statistics; a batch of one row (a single body's step)
        skips the batch's mean and variance, whose numpy calls cost more than the whole update (the same values)."""
        b_count = x.shape[0]
        total = self.count + b_count
        if b_count == 1:
            delta = x[0] - self.mean
            self.mean = self.mean + delta / total
            self.var = (self.var * self.count + delta**2 * self.count / total) / total
        else:
            b_mean, b_var = x.mean(axis=0), x.var(axis=0)
            delta = b_mean - self.mean
            self.mean = self.mean + delta * b_count / total
            m2 = self.var * self.count + b_var * b_count + delta**2 * self.count * b_count / total
            self.var = m2 / total
        self.count = total

    def state_dict(self) -> dict[str, Any]:
        """Statistics as tensors (loadable with torch.load(weights_only=True))."""
        return {"mean": torch.tensor(np.asarray(self.mean)), "var": torch.tensor(np.asarray(self.var)),
                "count": float(self.count)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore statistics saved by state_dict."""
        self.mean = state["mean"].numpy().astype(np.float64)
        self.var = state["var"].numpy().astype(np.float64)
        self.count = float(state["count"])


class ObsNormalizer:
    """Standardises observations with running statistics and clips them to +-clip."""

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0) -> None:
        self.rms = RunningMeanStd(shape)
        self.clip = clip
        self._std = self._current_std()

    def _current_std(self) -> np.ndarray:
        return np.sqrt(self.rms.var + 1e-8)

    def __call__(self, obs: np.ndarray, update: bool, rows: np.ndarray | None = None) -> np.ndarray:
        """Normalised float32 copy of a batch of observations; `update` folds the batch in first (only its `rows`,
        a bool mask, where given: a body that does not act this step would count its observation again)."""
        if update:
            batch = obs if rows is None else obs[rows]
            if len(batch):
                self.rms.update(batch)
                self._std = self._current_std()
        out = (obs - self.rms.mean) / self._std
        return np.minimum(np.maximum(out, -self.clip, out=out), self.clip, out=out).astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        return self.rms.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rms.load_state_dict(state)
        self._std = self._current_std()


class RewardScaler:
    """Divides rewards by the running std of each body's discounted return (as VecNormalize does)."""

    def __init__(self, num_bodies: int, gamma: float, clip: float = 10.0) -> None:
        self.rms = RunningMeanStd(())
        self.returns = np.zeros(num_bodies, np.float64)
        self.gamma = gamma
        self.clip = clip

    def __call__(self, reward: np.ndarray, done: np.ndarray) -> np.ndarray:
        """Scaled float32 rewards; tracks the discounted returns and resets them where episodes ended."""
        self.returns = self.returns * self.gamma + reward
        self.rms.update(self.returns)
        self.returns[done] = 0.0
        return np.clip(reward / np.sqrt(self.rms.var + 1e-8), -self.clip, self.clip).astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        return self.rms.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rms.load_state_dict(state)
