"""Each slot's running episode return and frames, kept as whole-array rows, one per step: the ends of episodes are
read off the rows in one batch every few dozen steps (or when the lab asks), not picked out slot by slot each step.

Row r of the tape holds, after step r: each slot's return of its episode so far, its frames in all, whether its
episode ended there (and whether by truncation alone) and the env's frame. A step costs a fixed handful of numpy
calls whatever the number of slots and ends. At a flush, the episodes found go to the env's EpisodeEnds in the order
they ended (step by step, slots in order within a step), each with the env frame of its own step; an episode's
length is its slot's frames at its end less those at its start (the end of the slot's episode before).
"""
from __future__ import annotations

import numpy as np

from slm_lab_like.envs.base import EpisodeEnds

CAPACITY = 64


class EpisodeTape:
    """The episode counters of `n` slots over the last steps (see the module doc); flushes itself into `ends`
    when its `capacity` steps are full."""

    def __init__(self, n: int, ends: EpisodeEnds, capacity: int = CAPACITY) -> None:
        rows = capacity + 1  # row 0 holds the state before the first unread step
        self.ends, self.capacity, self.k = ends, capacity, 0
        self.ret = np.zeros((rows, n), np.float64)
        self.frames = np.zeros((rows, n), np.int64)
        self.done = np.zeros((rows, n), bool)
        self.cut = np.zeros((rows, n), bool)  # truncated and not terminated
        self.env_frame = [0] * rows
        self.start = np.zeros(n, np.int64)  # each slot's frames when its current episode started
        self._keep = np.zeros(n, bool)
        # each array's rows as views in a list: a step indexes lists, not arrays
        self._ret, self._frames, self._done, self._cut = (list(a) for a in (self.ret, self.frames, self.done, self.cut))

    def record(self, reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray, env_frame: int,
               live: np.ndarray | None = None) -> np.ndarray:
        """Count one step; returns which slots' episodes ended at it. `live` marks the slots that acted (None: all);
        a slot whose episode ended at the step before starts a new one, its return from this step's reward."""
        prev, r = self.k, self.k + 1
        rets, frames, dones = self._ret, self._frames, self._done
        keep = np.logical_not(dones[prev], out=self._keep) if live is None else live
        ret = rets[r]
        np.multiply(rets[prev], keep, out=ret)
        np.add(ret, reward, out=ret)
        np.add(frames[prev], 1 if live is None else live, out=frames[r])
        done = np.logical_or(terminated, truncated, out=dones[r])
        np.greater(truncated, terminated, out=self._cut[r])
        self.env_frame[r] = env_frame
        self.k = r
        if r == self.capacity:
            self.flush()  # copies row r to row 0: `done` stays as it was until the next step
        return done

    def flush(self) -> None:
        """Append the episodes that ended since the last flush to `ends`."""
        k = self.k
        if not k:
            return
        steps, slots = np.nonzero(self.done[1:k + 1])
        steps += 1
        frames = self.frames[steps, slots]
        self.ends.extend(slots, self.ret[steps, slots], frames - self._starts(slots, frames), self.cut[steps, slots],
                         frames, np.asarray(self.env_frame)[steps])
        for rows in (self.ret, self.frames, self.done):
            rows[0] = rows[k]
        self.k = 0

    def _starts(self, slots: np.ndarray, frames: np.ndarray) -> np.ndarray:
        """Each ended episode's start: its slot's frames at the slot's end before (or `start`); `start` moves on."""
        order = np.argsort(slots, kind="stable")  # by slot, in step order within a slot
        s, f = slots[order], frames[order]
        first = np.ones(len(s), bool)
        first[1:] = s[1:] != s[:-1]
        before = np.empty_like(f)
        before[1:] = f[:-1]
        before[first] = self.start[s[first]]
        last = np.ones(len(s), bool)
        last[:-1] = first[1:]
        self.start[s[last]] = f[last]
        starts = np.empty_like(before)
        starts[order] = before
        return starts

    def restart(self) -> None:
        """Every slot starts a new episode (an env reset): unread ends are flushed first, frames are kept."""
        self.flush()
        self.ret[0], self.done[0] = 0.0, False
        self.start[:] = self.frames[0]

    @property
    def slot_frames(self) -> np.ndarray:
        """Each slot's frames in all so far."""
        return self.frames[self.k]

    def restore_frames(self, frames: list[int]) -> None:
        """Take each slot's frames from a checkpoint (a fresh episode starts in every slot)."""
        self.flush()
        self.frames[0] = frames
        self.start[:] = frames
