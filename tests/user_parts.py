"""A user's own parts, outside the package, for the tests of `module:Class` names (tests/test_user_parts.py)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from slm_lab_like.agents.base import Algorithm
from slm_lab_like.agents.memory.replay import Replay
from slm_lab_like.agents.net.mlp import MLP
from slm_lab_like.agents.random_agent import Random
from slm_lab_like.envs.base import Clock, LabEnv, SlotBlock


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


class Frozen(LabEnv):
    """A user's LabEnv with one mistake at a time, chosen by `mistake`, as a newcomer made them."""

    def __init__(self, name: str, n_slots: int, clock: Clock, max_t: int | None = None, mistake: str = "",
                 n: int = 2) -> None:
        if mistake == "constructor":
            raise KeyError("n")
        if n < 1:
            raise ValueError(f"n: at least 1, got {n}")
        self.block = SlotBlock(0, n_slots, spaces.Box(0.0, 1.0, (n,), np.float32), spaces.Discrete(2), name)
        super().__init__(name, clock, [self.block])
        self.mistake = mistake

    def reset(self, seed: int | None = None) -> None:
        self.block.obs[self.parity][...] = 0.0

    def step(self) -> None:
        b = self.block
        b.obs[1 - self.parity][...] = 0.0
        b.reward[:], b.terminated[:], b.truncated[:] = 0.0, False, False
        self.parity = 1 - self.parity
        if self.mistake != "no_frames":
            self.clock.frame += b.size

    def close(self) -> None:
        """Nothing to release."""


class NoMaxT(Frozen):
    """A LabEnv whose constructor has no place for max_t."""

    def __init__(self, name: str, n_slots: int, clock: Clock, n: int = 2) -> None:  # type: ignore[override]
        super().__init__(name, n_slots, clock, None, "", n)


class NoAct(Random):
    """An algorithm that forgot to define act (Random's is taken away)."""

    act = Algorithm.act  # abstract again


class StringSpaces(Random):
    """An algorithm that names its action spaces as strings."""

    action_spaces = ("Discrete",)  # type: ignore[assignment]


class OneShape(Random):
    """An algorithm that refuses to run on envs of different observation spaces (its signatures_problem)."""

    @classmethod
    def signatures_problem(cls, signatures):  # type: ignore[no-untyped-def]
        shapes = {obs.shape for obs, _ in signatures}
        return None if len(shapes) == 1 else f"OneShape takes one observation shape; got {sorted(shapes)}"


class Broken(Random):
    """An algorithm whose constructor fails, or whose state a checkpoint cannot hold (`fault` in its Config)."""

    @dataclass
    class Config:
        fault: str = "init"

    def __init__(self, config: Broken.Config, ctx: object) -> None:
        if config.fault == "init":
            raise RuntimeError("no GPU budget left")
        super().__init__(config, ctx)  # type: ignore[arg-type]

    def state_dict(self) -> dict:
        return {**super().state_dict(), "table": np.zeros(3)}


class Sleepy(gym.Env):
    """A slow env (a judge waiting on a gone player, a simulator): every step sleeps `pause` seconds."""

    observation_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, pause: float = 0.01) -> None:
        self.pause = pause

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        time.sleep(self.pause)
        return np.zeros(1, np.float32), 0.0, False, False, {}
