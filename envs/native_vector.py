"""Bodies of a single-agent env as one natively vectorized gymnasium env: every copy stepped in one numpy call.

Gymnasium vector envs reset finished sub-envs in one of two ways (their `metadata["autoreset_mode"]`):
- SAME_STEP: the step that ends an episode returns the next episode's first observation, and the final one in
  `info["final_obs"]`; the lab's buffers take both at once, as for copies.
- NEXT_STEP (gymnasium's own CartPoleVectorEnv): the ending step returns the final observation, and the *next*
  step resets that sub-env, ignoring its action and returning reward 0. The ending step's next observation is
  the final one (the block's `next_step`: final obs and completed rows are read from obs and acting, not copied);
  the slot is marked as not acting for that one reset step (the turn flags of gated envs), so no agent acts on
  or learns from it and the clock does not count it; the slot acts again from its new episode's first observation.
Episode returns, lengths and each slot's frames are kept on an EpisodeTape (whole-array rows, ends read off in
batches); `max_t` is the vector env's own episode limit.
"""
from __future__ import annotations

from typing import Callable

import gymnasium as gym
import numpy as np
from numpy import count_nonzero

from slm_lab_like.envs.base import Clock, LabEnv, SlotBlock
from slm_lab_like.envs.episodes import EpisodeTape

AutoresetMode = gym.vector.AutoresetMode
FEW_COLUMNS, MANY_ROWS = 16, 512  # a column-major batch of this few columns and this many rows is copied by column


def copy_batch(dst: np.ndarray, src: np.ndarray) -> None:
    """`dst[:] = src`, column by column where `src` is a column-major (n, k) batch of a few columns (gymnasium's
    numpy vector envs return `state.T`): each column is one contiguous read there, where numpy's single strided
    copy into a row-major buffer costs three times as much at thousands of rows (and a third as much at 64 rows,
    where the column loop's calls cost more than the copy)."""
    if (src.ndim == 2 and src.shape[1] <= FEW_COLUMNS and src.shape[0] >= MANY_ROWS and src.flags.f_contiguous
            and not src.flags.c_contiguous):
        for j in range(src.shape[1]):
            dst[:, j] = src[:, j]
    else:
        dst[:] = src


class GymNativeVectorEnv(LabEnv):
    """`n` copies of an env in one gymnasium VectorEnv made by `make(n)` (see the module doc)."""

    tape: EpisodeTape

    def __init__(self, name: str, make: Callable[[int], gym.vector.VectorEnv], n: int, clock: Clock) -> None:
        self.venv = make(n)
        mode = self.venv.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        if mode not in (AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP):
            self.venv.close()
            raise ValueError(f'env "{name}": vector autoreset mode {mode} is not supported; use "sync" copies')
        self.same_step = mode == AutoresetMode.SAME_STEP
        block = SlotBlock(0, n, self.venv.single_observation_space, self.venv.single_action_space,
                          where=f'env "{name}"')
        if not self.same_step:  # final obs and completed rows are read from obs and acting (SlotBlock.next_step)
            block.add_turns()
            block.next_step = True
        super().__init__(name, clock, [block])
        self.block = block
        self.tape = EpisodeTape(n, self.ended, next_step=not self.same_step)
        self.resetting = 0  # slots whose next native step is their reset (NEXT_STEP)
        self._closed = False

    def reset(self, seed: int | None = None) -> None:
        obs, _ = self.venv.reset(seed=seed)
        blk = self.block
        copy_batch(blk.obs[self.parity], obs)
        self.tape.restart()
        self.resetting = 0
        if blk.acting is not None:
            blk.acting[self.parity][:] = True

    def step(self) -> None:
        blk, q = self.block, 1 - self.parity
        obs, reward, terminated, truncated, info = self.venv.step(blk.action)
        copy_batch(blk.obs[q], obs)
        blk.reward[:] = reward
        blk.terminated[:] = terminated
        blk.truncated[:] = truncated
        clock = self.clock
        if self.same_step:
            clock.frame += blk.size
            done = self.tape.record(reward, terminated, truncated, clock.frame)
            if count_nonzero(done):
                blk.final_obs[done] = np.stack(info["final_obs"][done])
        else:
            acting = blk.acting
            assert acting is not None
            clock.frame += blk.size - self.resetting
            done = self.tape.record(reward, terminated, truncated, clock.frame)
            np.logical_not(done, out=acting[q])
            self.resetting = int(count_nonzero(done))
        self.parity = q

    @property
    def slot_frames(self) -> list[int]:
        return self.tape.slot_frames.tolist()

    def restore_slot_frames(self, frames: list[int]) -> None:
        self.tape.restore_frames(frames)

    def render(self) -> object:
        frames = self.venv.render()
        return frames[0] if isinstance(frames, (list, tuple)) else frames

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.venv.close()
