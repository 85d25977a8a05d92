"""A user's own parts, outside the package, for the tests of `module:Class` names (tests/test_user_parts.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from slm_lab_like.agents.memory.replay import Replay
from slm_lab_like.agents.net.mlp import MLP
from slm_lab_like.agents.random_agent import Random


@dataclass
class ConstantConfig:
    """One setting: the action every body takes."""

    action: int = field(default=0, metadata={"min": 0})


class Constant(Random):
    """Always the same Discrete action: an algorithm of the user's own."""

    Config = ConstantConfig

    def act(self, group: int, obs: np.ndarray, mask: np.ndarray | None = None,
            acting: np.ndarray | None = None) -> np.ndarray:
        return np.full(len(obs), self.config.action, dtype=np.int64)


class CountingReplay(Replay):
    """A replay memory that counts what it stores: a user's memory, a subclass of one DQN learns from."""

    added = 0

    def add(self, *args: object, **kwargs: object) -> None:
        CountingReplay.added += 1
        super().add(*args, **kwargs)  # type: ignore[arg-type]


class WideMLP(MLP):
    """The MLP under a name of the user's: a net, so every check of nets applies."""


class NotAnAlgorithm:
    """A class with a Config that is no Algorithm."""

    Config = ConstantConfig


class NoConfig(Random):
    """An algorithm that declares no Config dataclass."""

    Config = None  # type: ignore[assignment]
