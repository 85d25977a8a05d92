"""Schedules: hyperparameters (lr, epsilon, clip, entropy) that move with the agent's frame count."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Literal


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
        problem = self.problem()
        if problem:
            raise ValueError(problem)
        return self.start * (self.end / self.start) ** frac

    def problem(self) -> str | None:
        """Why this schedule cannot be evaluated (one line), or None."""
        if self.name == "exponential" and (self.start == 0.0 or self.start * self.end <= 0.0):
            return (f"an exponential schedule needs start and end of the same sign, both non-zero; got start "
                    f"{self.start}, end {self.end}")
        return None


def schedules_problem(config: Any) -> tuple[str, str] | None:
    """(dotted field, reason) of the first schedule in a config dataclass (nested ones too) that cannot be
    evaluated, or None; spec validation asks this so that a bad schedule fails before the run, not mid-way."""
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        return None
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, Schedule):
            problem = value.problem()
            if problem:
                return f.name, problem
        else:
            nested = schedules_problem(value)
            if nested:
                return f"{f.name}.{nested[0]}", nested[1]
    return None


def value_at(value: float | Schedule, frame: int) -> float:
    """A hyperparameter's value at `frame`: the number itself, or the schedule evaluated there."""
    return value(frame) if isinstance(value, Schedule) else float(value)
