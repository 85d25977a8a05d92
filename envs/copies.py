"""Several copies of one multi-agent game as one lab env: many games of a PettingZoo env in one env entry.

`GameCopies` holds `k` copies of a LabEnv (each one game, its bodies in slot order) and lays their slots end to end:
copy c's slot i is slot `c * n + i`. Each merged block owns the buffers, and the copies' blocks are rebound to views
of them, so every copy writes its observations, rewards and flags straight where the lab reads them, with no copy per
step. The copies share the env's clock (each adds its own frames) and step in lockstep (one parity); their episode
ends move to this env's `ended` with their slots shifted.
"""
from __future__ import annotations

import itertools
from typing import Callable, Sequence

import numpy as np

from slm_lab_like.envs.base import Clock, LabEnv, SlotBlock

ARRAYS = ("final_obs", "action", "reward", "terminated", "truncated", "final_action_mask", "completed")
PAIRS = ("obs", "action_mask", "acting")  # double-buffered: one array per parity


def _signature(block: SlotBlock) -> tuple:
    return (block.observation_space, block.action_space, block.action_mask is not None, block.acting is not None)


class GameCopies(LabEnv):
    """`len(makers)` copies of a game, each made by `maker(clock)` on the shared clock; see the module doc."""

    def __init__(self, name: str, makers: Sequence[Callable[[Clock], LabEnv]], clock: Clock) -> None:
        self.copies = [make(clock) for make in makers]
        self.offsets = np.cumsum([0] + [c.n_slots for c in self.copies])[:-1].tolist()
        parts = [b for c in self.copies for b in c.blocks]  # in slot order: copy by copy, block by block
        blocks: list[SlotBlock] = []
        start = 0
        for _, run in itertools.groupby(parts, key=_signature):  # neighbours of one signature share a block
            same = list(run)
            blocks.append(self._merged(same, start, name))
            start += sum(b.size for b in same)
        super().__init__(name, clock, blocks)

    @staticmethod
    def _merged(run: list[SlotBlock], start: int, name: str) -> SlotBlock:
        """One block over the copies' blocks in `run` (one signature), whose buffers they now write through."""
        first = run[0]
        size = sum(b.size for b in run)
        merged = SlotBlock(start, start + size, first.observation_space, first.action_space, where=f'env "{name}"')
        if first.action_mask is not None:
            merged.add_action_masks(first.action_mask[0].shape[1])
        if first.acting is not None:
            merged.add_turns()
        merged.next_step = first.next_step
        row = 0
        for block in run:
            rows = slice(row, row + block.size)
            for attr in ARRAYS:
                if getattr(merged, attr) is not None:
                    setattr(block, attr, getattr(merged, attr)[rows])
            for attr in PAIRS:
                pair = getattr(merged, attr)
                if pair is not None:
                    setattr(block, attr, (pair[0][rows], pair[1][rows]))
            row += block.size
        return merged

    @property
    def slot_frames(self) -> list[int]:
        return [f for c in self.copies for f in c.slot_frames]

    def restore_slot_frames(self, frames: list[int]) -> None:
        for c, lo in zip(self.copies, self.offsets):
            c.restore_slot_frames(frames[lo:lo + c.n_slots])

    def reset(self, seed: int | None = None) -> None:
        """Every copy starts afresh; copy c takes seed + c (so the games differ)."""
        for k, c in enumerate(self.copies):
            c.parity = self.parity
            c.reset(None if seed is None else seed + k)
        self._gather()

    def step(self) -> None:
        for c in self.copies:
            c.step()
        self.parity = 1 - self.parity
        self._gather()

    def _gather(self) -> None:
        """Every copy's finished episodes into `ended`, slots shifted to this env's numbering."""
        for c, lo in zip(self.copies, self.offsets):
            ends = c.flush_ends()
            if ends.n:
                self.ended.extend(ends.slot + lo, ends.ret, ends.length, ends.truncated, ends.body_frame,
                                  ends.env_frame)
                ends.clear()

    def render(self) -> object:
        return self.copies[0].render()

    def close(self) -> None:
        for c in self.copies:
            c.close()
