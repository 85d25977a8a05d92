"""The Random agent: uniform actions from each group's action space (only legal ones where the env gives
legal-action masks); the baseline every lab needs."""
from __future__ import annotations

from functools import partial
from typing import Iterator

import gymnasium as gym
import numpy as np

from slm_lab_like.agents.base import AgentContext, Algorithm, NoConfig
from slm_lab_like.agents.explore import random_legal
from slm_lab_like.array_spaces import ARRAY_SPACES

CHUNK_BYTES = 1 << 16  # a chunk of 2 MB (256 bodies x 1024 steps) evicted the env's own arrays from the cache


class BatchSampler:
    """Uniform actions for `n` bodies, `chunk` steps (at most CHUNK_BYTES) at a time: one draw per chunk keeps the hot
    loop cheap. A Discrete space of 2**k actions (k <= 16) draws its actions as raw bits of the seeded generator, a
    byte (or two) per action masked to k bits: a fifth of what Generator.integers costs, and as uniform. Another
    Discrete draws as gymnasium's Discrete.sample does (Generator.integers); other spaces by gymnasium's sampler of
    the batched space."""

    def __init__(self, space: gym.Space, n: int, seed: int, chunk: int = 1024) -> None:
        self.discrete = space if isinstance(space, gym.spaces.Discrete) else None
        self.bits = raw_bits_dtype(space)
        dtype = self.bits or np.dtype(space.dtype or np.int64)
        per_step = n * int(np.prod(space.shape or ())) * dtype.itemsize
        chunk = max(1, min(chunk, CHUNK_BYTES // max(1, per_step)))  # a chunk that stays in cache beside the env's arrays
        self.arrays = isinstance(space, ARRAY_SPACES)  # else (Tuple, Dict, ...) one step a draw, as gymnasium batches it
        self.chunk = chunk if self.arrays else 1
        self.shape = (self.chunk, n) + tuple(space.shape or ())
        if self.discrete is None:  # the batched space and its sampler, seeded
            self.space = gym.vector.utils.batch_space(space, n * self.chunk)
            self.space.seed(seed)
        else:  # the generator that space.seed(seed) would give it
            self.rng = gym.utils.seeding.np_random(seed)[0]

    def __iter__(self) -> Iterator[np.ndarray]:
        """Each step's actions, one draw a chunk."""
        d = self.discrete
        while True:
            if not self.arrays:
                yield self.space.sample()
            elif self.bits is not None and d is not None:  # each step's raw row, cast to the space's dtype
                for row in self._draw():
                    yield np.add(row, d.start, dtype=d.dtype)
            else:
                yield from self._draw()

    def _draw(self) -> np.ndarray:
        """The next chunk of actions, shape (chunk, n, *action_shape) (raw bits, uncast, for a 2**k Discrete)."""
        d = self.discrete
        if d is None:
            return self.space.sample().reshape(self.shape)
        if self.bits is not None:
            count = int(np.prod(self.shape))
            words = self.rng.bit_generator.random_raw(-(-count * self.bits.itemsize // 8))
            raw = words.view(self.bits)[:count].reshape(self.shape)
            raw &= int(d.n) - 1
            return raw
        return self.rng.integers(d.start, d.start + d.n, size=self.shape, dtype=d.dtype)


def raw_bits_dtype(space: gym.Space) -> np.dtype | None:
    """The unsigned dtype whose raw bits draw `space`'s actions uniformly (a Discrete of 2**k actions, k <= 16), or
    None."""
    if not isinstance(space, gym.spaces.Discrete) or int(space.n) & (int(space.n) - 1):
        return None
    return np.dtype(np.uint8) if space.n <= 1 << 8 else np.dtype(np.uint16) if space.n <= 1 << 16 else None


class Random(Algorithm):
    """Samples each body's action uniformly; learns nothing."""

    Config = NoConfig

    def __init__(self, config: NoConfig, ctx: AgentContext) -> None:
        super().__init__(config, ctx)
        self.samplers = [partial(next, iter(BatchSampler(g.action_space, g.num_bodies, ctx.seed + i)))
                         for i, g in enumerate(self.groups)]
        self.mask_rng = np.random.default_rng(ctx.seed + 7919)

    def act(self, group: int, obs: np.ndarray, mask: np.ndarray | None = None,
            acting: np.ndarray | None = None) -> np.ndarray:
        """Uniform actions; under a legal-action mask a uniformly random legal one per body (0 where none is)."""
        if mask is not None:
            return random_legal(mask, self.mask_rng)
        return self.samplers[group]()
