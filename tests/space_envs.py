"""Small gymnasium envs over every space kind, for tests that must meet what users bring (`module:Class` names).

`SpaceEnv(obs=KIND, act=KIND)` observes and acts in the named space kind; its reward is 1 when the action's
first component matches a hidden target derived from the observation, so learners have something to find.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

OBS_KINDS = ("box", "image", "discrete", "multidiscrete", "multibinary", "tuple", "dict")
ACT_KINDS = ("discrete", "box", "multidiscrete", "multibinary")


def obs_space(kind: str) -> spaces.Space:
    """The observation space of a kind."""
    return {
        "box": spaces.Box(-1.0, 1.0, (3,), np.float32),
        "image": spaces.Box(0, 255, (3, 16, 16), np.uint8),
        "discrete": spaces.Discrete(4),
        "multidiscrete": spaces.MultiDiscrete([3, 2]),
        "multibinary": spaces.MultiBinary(3),
        "tuple": spaces.Tuple((spaces.Discrete(3), spaces.Box(-1.0, 1.0, (2,), np.float32))),
        "dict": spaces.Dict({"pos": spaces.Discrete(4), "vel": spaces.Box(-1.0, 1.0, (2,), np.float32)}),
    }[kind]


def act_space(kind: str) -> spaces.Space:
    """The action space of a kind."""
    return {
        "discrete": spaces.Discrete(3),
        "box": spaces.Box(-1.0, 1.0, (2,), np.float32),
        "multidiscrete": spaces.MultiDiscrete([3, 2]),
        "multibinary": spaces.MultiBinary(2),
    }[kind]


class SpaceEnv(gym.Env):
    """Episodes of `length` steps over the named observation and action space kinds."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, obs: str = "box", act: str = "discrete", length: int = 10) -> None:
        self.observation_space = obs_space(obs)
        self.action_space = act_space(act)
        self.length = length
        self.t = 0
        self.state = None

    def _obs(self) -> Any:
        self.state = self.observation_space.sample()
        return self.state

    def _target(self) -> int:
        flat = gym.spaces.flatten(self.observation_space, self.state)
        return int(np.argmax(flat)) % 2

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        first = float(np.asarray(action).ravel()[0])
        reward = 1.0 if round(first) == self._target() else 0.0
        self.t += 1
        return self._obs(), reward, self.t >= self.length, False, {}


class TextEnv(gym.Env):
    """An env whose observations are strings: no array can hold them, so the lab must refuse it up front."""

    observation_space = spaces.Text(4)
    action_space = spaces.Discrete(2)


BROKEN_FAULTS = ("shape", "old_api", "step_raises", "reward", "dict_key")


class BrokenEnv(gym.Env):
    """An env that breaks its promises in one way (`fault`), as users' envs do: observations of another shape than
    its space (`shape`), an old gym 4-tuple step (`old_api`), a step that raises (`step_raises`), a reward that is
    no number (`reward`), a Dict observation missing a key (`dict_key`). `check` must refuse each in one line."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, fault: str = "shape") -> None:
        self.fault = fault
        self.observation_space = (spaces.Dict({"a": spaces.Discrete(3), "b": spaces.Box(-1.0, 1.0, (2,), np.float32)})
                                  if fault == "dict_key" else spaces.Box(-1.0, 1.0, (3,), np.float32))
        self.action_space = spaces.Discrete(2)

    def _obs(self) -> Any:
        if self.fault == "dict_key":
            return {"a": 1}
        return np.zeros(4 if self.fault == "shape" else 3, np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action: Any) -> Any:
        if self.fault == "step_raises":
            raise RuntimeError("the simulator lost its state")
        if self.fault == "old_api":
            return self._obs(), 0.0, False, {}
        return self._obs(), None if self.fault == "reward" else 0.0, False, False, {}


REGISTERED_ID = "LabTestSpaces-v0"
if REGISTERED_ID not in gym.registry:  # registered on import, as user packages do: specs name it module:EnvId
    gym.register(id=REGISTERED_ID, entry_point="tests.space_envs:SpaceEnv", max_episode_steps=8)


class SpaceVectorEnv(gym.vector.VectorEnv):
    """`num_envs` SpaceEnvs with Box observations stepped as whole arrays (gymnasium's NEXT_STEP autoreset, as its
    CartPoleVectorEnv): the lab's natively vectorized kind at any number of bodies, for each action space kind."""

    metadata: dict[str, Any] = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int, act: str = "discrete", length: int = 10, **_: Any) -> None:
        self.num_envs, self.length = num_envs, length
        self.single_observation_space, self.single_action_space = obs_space("box"), act_space(act)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self.t = np.zeros(num_envs, np.int64)
        self.ended = np.zeros(num_envs, bool)
        self.obs = np.zeros((num_envs, 3), np.float32)

    def _observe(self, rows: np.ndarray | slice) -> None:
        self.obs[rows] = self.np_random.uniform(-1.0, 1.0, self.obs[rows].shape)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t[:], self.ended[:] = 0, False
        self._observe(slice(None))
        return self.obs.copy(), {}

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        first = np.asarray(actions).reshape(self.num_envs, -1)[:, 0]
        reward = (np.round(first) == np.argmax(self.obs, axis=1) % 2).astype(np.float64)
        reward[self.ended] = 0.0
        self.t = np.where(self.ended, 0, self.t + 1)
        self._observe(slice(None))
        terminated = self.t >= self.length
        self.ended = terminated
        return self.obs.copy(), reward, terminated, np.zeros(self.num_envs, bool), {}


VECTOR_ID = "LabTestSpaceVectors-v0"
if VECTOR_ID not in gym.registry:  # `tests.space_envs:LabTestSpaceVectors-v0`, natively vectorized (vector "auto")
    gym.register(id=VECTOR_ID, entry_point="tests.space_envs:SpaceEnv", vector_entry_point=SpaceVectorEnv)
