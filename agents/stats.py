"""One stats channel out of an algorithm: namespaced scalars per update (`train/policy_loss`, `train/lr`, ...).

An algorithm calls `self.stats.report(frame, {...})` at the end of each update; the lab drains the channel and
writes what it holds (TensorBoard, a CSV per agent, plots). Algorithms never write files.
"""
from __future__ import annotations

from typing import Mapping

import torch


class Stats:
    """Reports waiting for the lab: (the agent's frame at the update, {key: value})."""

    def __init__(self) -> None:
        self.pending: list[tuple[int, dict[str, float]]] = []

    def report(self, frame: int, values: Mapping[str, float | torch.Tensor]) -> None:
        """Record one update's scalars (tensors are read once here, off the acting path)."""
        self.pending.append((frame, {k: float(v.detach()) if isinstance(v, torch.Tensor) else float(v)
                                     for k, v in values.items()}))

    def drain(self) -> list[tuple[int, dict[str, float]]]:
        """Every report since the last drain, oldest first."""
        out, self.pending = self.pending, []
        return out


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    """1 - Var(returns - values) / Var(returns): how much of the return the critic explains (nan when flat)."""
    var = returns.var(unbiased=False)
    return 1 - (returns - values).var(unbiased=False) / var if var > 0 else torch.tensor(float("nan"))
