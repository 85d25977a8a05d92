"""Corridors: a user's lab-native env (a LabEnv subclass) that steps every body's corridor as one numpy array, written
against docs/write-a-lab-env.md. A spec names it `"name": "corridor:Corridors"` from this directory.

Each body walks a corridor of `length` cells, starting in a random cell of its left half: action 0 steps left, 1
steps right. Reaching the right end ends the episode (terminated, reward +1); every other step costs 0.01; an
episode of `max_t` steps (default 4 x length) is truncated. The observation is the body's cell, one-hot.
"""
from __future__ import annotations

import numpy as np
from gymnasium import spaces

from slm_lab_like.envs.base import Clock, LabEnv, SlotBlock


class Corridors(LabEnv):
    """`n_slots` corridors, one per body, in one SlotBlock: every step is one move in every corridor."""

    def __init__(self, name: str, n_slots: int, clock: Clock, max_t: int | None = None, length: int = 10) -> None:
        if length < 2:
            raise ValueError(f"length: a corridor has at least 2 cells, got {length}")
        block = SlotBlock(0, n_slots, spaces.Box(0.0, 1.0, (length,), np.float32), spaces.Discrete(2),
                          where=f'env "{name}"')
        super().__init__(name, clock, [block])
        self.block = block
        self.length = length
        self.max_t = max_t or 4 * length
        self.rng = np.random.default_rng()
        self.cell = np.zeros(n_slots, np.int64)
        self.t = np.zeros(n_slots, np.int64)  # steps of each body's episode so far
        self.ret = np.zeros(n_slots, np.float64)  # return of each body's episode so far
        self.rows = np.arange(n_slots)

    def _start(self, slots: np.ndarray) -> None:
        """New episodes in `slots`: a random cell of the left half, no steps, no return."""
        self.cell[slots] = self.rng.integers(0, self.length // 2, len(slots))
        self.t[slots] = 0
        self.ret[slots] = 0.0

    def _observe(self, out: np.ndarray, slots: np.ndarray) -> None:
        """The one-hot cells of `slots` into `out` (rows of those slots)."""
        out[slots] = 0.0
        out[slots, self.cell[slots]] = 1.0

    def reset(self, seed: int | None = None) -> None:
        """Every body's first episode; observations land in obs[parity]."""
        self.rng = np.random.default_rng(seed)
        self._start(self.rows)
        self._observe(self.block.obs[self.parity], self.rows)

    def step(self) -> None:
        """One move in every corridor: next observations into obs[1 - parity], ended episodes to `ended` (each slot
        starting its next episode at once, its final observation kept in final_obs), parity flipped, frames
        counted."""
        b, p = self.block, self.parity
        self.cell = np.clip(self.cell + np.where(b.action == 1, 1, -1), 0, self.length - 1)
        self.t += 1
        terminated = self.cell == self.length - 1
        truncated = (self.t >= self.max_t) & ~terminated
        b.reward[:] = np.where(terminated, 1.0, -0.01)
        b.terminated[:] = terminated
        b.truncated[:] = truncated
        self.ret += b.reward
        done = np.flatnonzero(terminated | truncated)
        if len(done):
            self._observe(b.final_obs, done)
            self.ended.extend(done, self.ret[done], self.t[done], truncated[done])
            self._start(done)
        self._observe(b.obs[1 - p], self.rows)
        self.parity = 1 - p
        self.clock.frame += b.size  # one frame per body that acted: here every body, every step

    def close(self) -> None:
        """Nothing to release (safe to call twice)."""
