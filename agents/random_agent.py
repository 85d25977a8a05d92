"""The Random agent: uniform actions from each group's action space; the baseline every lab needs."""
from __future__ import annotations

import gymnasium as gym
import numpy as np

from agents.base import AgentContext, Algorithm, NoConfig
from agents.registry import ALGORITHMS

ARRAY_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


class BatchSampler:
    """Uniform actions for `n` bodies drawn by gymnasium's sampler of the batched space, `chunk` steps
    at a time: one sample() call per chunk instead of per step keeps the (1,1,1) hot loop cheap."""

    def __init__(self, space: gym.Space, n: int, seed: int, chunk: int = 1024) -> None:
        self.chunk = chunk if isinstance(space, ARRAY_SPACES) else 1
        self.space = gym.vector.utils.batch_space(space, n * self.chunk)
        self.space.seed(seed)
        self.shape = (self.chunk, n) + tuple(space.shape or ())
        self.buf = self.space.sample().reshape(self.shape) if self.chunk > 1 else None
        self.k = 0

    def __call__(self) -> np.ndarray:
        if self.buf is None:
            return self.space.sample()
        if self.k == self.chunk:
            self.buf = self.space.sample().reshape(self.shape)
            self.k = 0
        self.k += 1
        return self.buf[self.k - 1]


@ALGORITHMS.register("Random")
class Random(Algorithm):
    """Samples each body's action uniformly; learns nothing."""

    Config = NoConfig

    def __init__(self, config: NoConfig, ctx: AgentContext) -> None:
        super().__init__(config, ctx)
        self.samplers = [BatchSampler(g.action_space, g.num_bodies, ctx.seed + i) for i, g in enumerate(self.groups)]

    def act(self, group: int, obs: np.ndarray) -> np.ndarray:
        return self.samplers[group]()
