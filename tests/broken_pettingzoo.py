"""A PettingZoo-style parallel env that breaks its promises (for `check`'s probe of multi-agent envs)."""
from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces


class BrokenParallel:
    """Two players whose observations are 5 floats where their space says 3 (`shape`), or whose step raises
    (`step_raises`)."""

    metadata: dict[str, Any] = {"name": "broken_parallel_v0"}

    def __init__(self, fault: str = "shape") -> None:
        self.fault = fault
        self.possible_agents = ["p0", "p1"]
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(-1.0, 1.0, (3,), np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(2)

    def _obs(self) -> dict[str, np.ndarray]:
        return {a: np.zeros(5 if self.fault == "shape" else 3, np.float32) for a in self.agents}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.agents = list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        if self.fault == "step_raises":
            raise RuntimeError("the physics engine diverged")
        flags = {a: False for a in self.agents}
        return self._obs(), {a: 0.0 for a in self.agents}, flags, dict(flags), {a: {} for a in self.agents}

    def close(self) -> None:
        """Nothing to release."""


def parallel_env(fault: str = "shape") -> BrokenParallel:
    """PettingZoo's factory name: the lab takes it as a parallel env."""
    return BrokenParallel(fault)
