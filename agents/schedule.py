"""Schedules: hyperparameters (lr, epsilon, clip, entropy) that move with the agent's frame count."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal


@dataclass
class Schedule:
    """A value that goes from `start` to `end` over `frames` frames after `start_frame`, then stays at `end`."""

    name: Literal["linear", "cosine", "exponential", "constant"] = "linear"
    start: float = 1.0
    end: float = 0.0
    frames: int = field(default=100000, metadata={"min": 1})
    start_frame: int = field(default=0, metadata={"min": 0})

    def __call__(self, frame: int) -> float:
        """The value at `frame`."""
        if self.name == "constant":
            return self.start
        frac = min(max((frame - self.start_frame) / self.frames, 0.0), 1.0)
        if self.name == "linear":
            return self.start + frac * (self.end - self.start)
        if self.name == "cosine":
            return self.end + 0.5 * (self.start - self.end) * (1.0 + math.cos(math.pi * frac))
        if self.start == 0.0 or self.start * self.end <= 0.0:
            raise ValueError("an exponential schedule needs start and end of the same sign, both non-zero")
        return self.start * (self.end / self.start) ** frac


def value_at(value: float | Schedule, frame: int) -> float:
    """A hyperparameter's value at `frame`: the number itself, or the schedule evaluated there."""
    return value(frame) if isinstance(value, Schedule) else float(value)
