"""The episodes an env finished: the columns the lab reads them from (EpisodeEnds), filled as they end or, by envs
stepped as whole arrays, read off an EpisodeTape in batches.

The tape keeps each slot's running episode return as whole-array rows, one per step, so the ends of episodes are
read off the rows in one batch every few dozen steps (or when the lab asks), not picked out slot by slot each
step. Row r holds, after step r: each slot's return of its episode so far, whether its episode ended there (and
whether by truncation alone) and the env's frame. A step costs a fixed handful of numpy calls whatever the number
of slots and ends. At a flush, the episodes found go to the env's EpisodeEnds in the order they ended (step by
step, slots in order within a step), each with the env frame of its own step; a slot's frames at an end are
worked out there (its frames at row 0 plus the step, less its reset steps under NEXT_STEP autoreset), and an
episode's length is its slot's frames at its end less those at its start (the end of the slot's episode before).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

CAPACITY, CELLS, MAX_CAPACITY = 64, 1 << 16, 1024  # steps a tape holds: at least 64, more for few slots (the
# rows x slots of 64 steps of 1,024 slots, up to 1,024 steps): a flush's fixed cost, some 70 us, is half the lab's
# share of a 64-slot CartPole step when it comes every 64 steps
DROPPED = "_dropped"  # a vector env's info key: slots whose episode ended at this step by a fault (a lost judge), not
# by the env; the tape drops those episodes, and counts them, instead of recording a cut return


@dataclass
class EpisodeEnd:
    """An episode that ended in a slot: its return and length, whether it was truncated, the slot's own frame
    count so far when it differs from `clock.frame // n_slots` (turn-based games, players done early), and the
    env's frame when it ended, where the env read its ends off later than the step (None: the clock's frame now)."""

    slot: int
    ret: float
    length: int
    truncated: bool
    body_frame: int | None = None
    env_frame: int | None = None


HOLD_STEPS, HOLD_ENDS = 256, 64  # an env that holds its ends back hands them over every HOLD_STEPS steps or HOLD_ENDS ends


class EpisodeEnds:
    """The episodes that ended in an env since the lab last read them, as columns: slot, return, length, whether
    truncated, the slot's own frame count (-1 where it is `clock.frame // n_slots`) and the env's frame at the end
    (-1 where it is the clock's frame when the lab reads them). Envs stepped as arrays `extend` it with arrays, so
    no per-body Python runs when many episodes end at once; others `append`."""

    _COLUMNS = ("_slot", "_ret", "_length", "_truncated", "_frame", "_env_frame")

    def __init__(self, capacity: int = 64) -> None:
        self._slot = np.zeros(capacity, np.int64)
        self._ret = np.zeros(capacity, np.float64)
        self._length = np.zeros(capacity, np.int64)
        self._truncated = np.zeros(capacity, bool)
        self._frame = np.zeros(capacity, np.int64)
        self._env_frame = np.zeros(capacity, np.int64)
        self.n = 0

    def _room(self, k: int) -> None:
        if self.n + k > len(self._slot):
            size = max(2 * len(self._slot), self.n + k)
            for name in self._COLUMNS:
                old = getattr(self, name)
                new = np.zeros(size, old.dtype)
                new[:self.n] = old[:self.n]
                setattr(self, name, new)

    def append(self, slot: int, ret: float, length: int, truncated: bool, body_frame: int | None = None,
               env_frame: int | None = None) -> None:
        """One episode that ended in `slot`."""
        self._room(1)
        i = self.n
        self._slot[i], self._ret[i], self._length[i], self._truncated[i] = slot, ret, length, truncated
        self._frame[i] = -1 if body_frame is None else body_frame
        self._env_frame[i] = -1 if env_frame is None else env_frame
        self.n += 1

    def move_to(self, other: EpisodeEnds) -> None:
        """Append every episode here to `other` and empty this one (swapping the columns when `other` is empty)."""
        if not self.n:
            return
        if other.n:
            other.extend(self.slot, self.ret, self.length, self.truncated, self.body_frame, self.env_frame)
        else:
            for name in self._COLUMNS:
                mine, theirs = getattr(self, name), getattr(other, name)
                setattr(self, name, theirs)
                setattr(other, name, mine)
            other.n = self.n
        self.n = 0

    def extend(self, slots: np.ndarray, rets: np.ndarray, lengths: np.ndarray, truncated: np.ndarray,
               body_frames: np.ndarray | None = None, env_frames: np.ndarray | None = None) -> None:
        """Episodes that ended in `slots` (arrays of one length)."""
        k = len(slots)
        self._room(k)
        s = slice(self.n, self.n + k)
        self._slot[s], self._ret[s], self._length[s], self._truncated[s] = slots, rets, lengths, truncated
        self._frame[s] = -1 if body_frames is None else body_frames
        self._env_frame[s] = -1 if env_frames is None else env_frames
        self.n += k

    @property
    def slot(self) -> np.ndarray:
        return self._slot[:self.n]

    @property
    def ret(self) -> np.ndarray:
        return self._ret[:self.n]

    @property
    def length(self) -> np.ndarray:
        return self._length[:self.n]

    @property
    def truncated(self) -> np.ndarray:
        return self._truncated[:self.n]

    @property
    def body_frame(self) -> np.ndarray:
        return self._frame[:self.n]

    @property
    def env_frame(self) -> np.ndarray:
        return self._env_frame[:self.n]

    def clear(self) -> None:
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> EpisodeEnd:
        if not -self.n <= i < self.n:
            raise IndexError(i)
        i %= self.n
        frame, env_frame = int(self._frame[i]), int(self._env_frame[i])
        return EpisodeEnd(int(self._slot[i]), float(self._ret[i]), int(self._length[i]), bool(self._truncated[i]),
                          None if frame < 0 else frame, None if env_frame < 0 else env_frame)

    def __iter__(self) -> Iterator[EpisodeEnd]:
        return (self[i] for i in range(self.n))


class EpisodeTape:
    """The episode counters of `n` slots over the last steps (see the module doc); flushes itself into `ends`
    when its `capacity` steps are full (by default set from `n`: CAPACITY, CELLS, MAX_CAPACITY). `next_step`: the
    env resets a slot at the step after its episode ended (gymnasium's NEXT_STEP autoreset), a step that is not one
    of the slot's frames."""

    def __init__(self, n: int, ends: EpisodeEnds, capacity: int | None = None, next_step: bool = False) -> None:
        if capacity is None:
            capacity = min(MAX_CAPACITY, max(CAPACITY, CELLS // max(n, 1)))
        rows = capacity + 1  # row 0 holds the state before the first unread step
        self.ends, self.capacity, self.next_step, self.k = ends, capacity, next_step, 0
        self.ret = np.zeros((rows, n), np.float64)
        self.done = np.zeros((rows, n), bool)
        self.cut = np.zeros((rows, n), bool)  # truncated and not terminated
        self.env_frame = [0] * rows
        self.frames = np.zeros(n, np.int64)  # each slot's frames at row 0
        self.start = np.zeros(n, np.int64)  # each slot's frames when its current episode started
        self._reward = np.zeros(n)
        self.void: np.ndarray | None = None  # rows x slots: ends to drop, made at the first one
        self.dropped = 0  # episodes dropped so far
        self._key = np.int16 if n <= np.iinfo(np.int16).max else np.int64  # 16-bit slot keys sort by radix
        # each array's rows as views in a list: a step indexes lists, not arrays
        self._ret, self._done, self._cut = (list(a) for a in (self.ret, self.done, self.cut))

    def record(self, reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray, env_frame: int,
               dropped: np.ndarray | None = None) -> np.ndarray:
        """Count one step; returns which slots' episodes ended at it. A slot whose episode ended at the step before
        starts a new one, its return from this step's reward (0 at a NEXT_STEP reset). `dropped`: slots whose
        episode ends here by a fault, dropped instead of recorded (they must be among the ended ones)."""
        prev, r = self.k, self.k + 1
        ret = self._ret[r]
        self._reward[:] = reward  # a same-dtype add after a cast copy: numpy's casting inside a ufunc costs more
        np.add(self._ret[prev], self._reward, out=ret)
        np.copyto(ret, self._reward, where=self._done[prev])
        done = np.logical_or(terminated, truncated, out=self._done[r])
        np.greater(truncated, terminated, out=self._cut[r])
        self.env_frame[r] = env_frame
        self.k = r
        if dropped is not None:
            if self.void is None:
                self.void = np.zeros_like(self.done)
            self.void[r] = dropped
        if r == self.capacity:
            self.flush()  # copies row r to row 0: `done` stays as it was until the next step
        return done

    def flush(self) -> None:
        """Append the episodes that ended since the last flush to `ends`."""
        k = self.k
        if not k:
            return
        n = self.ret.shape[1]
        at = np.flatnonzero(self.done[1:k + 1]) + n  # flat positions in the tape, in end order
        if len(at):
            steps, slots = np.divmod(at, n)
            frames, starts = self._frames_and_starts(steps, slots)
            rets, cuts, env_frames = self.ret.ravel().take(at), self.cut.ravel().take(at), np.take(self.env_frame, steps)
            if self.void is not None:  # a fault's cut episodes: their slots' frames move on, no row is written
                keep = ~self.void.ravel().take(at)
                self.dropped += len(keep) - int(np.count_nonzero(keep))
                slots, rets, frames, starts, cuts, env_frames = (a[keep] for a in (slots, rets, frames, starts, cuts,
                                                                                   env_frames))
            self.ends.extend(slots, rets, frames - starts, cuts, frames, env_frames)
        self.void = None
        self.frames += k - self._resets(k, slots if len(at) else None)
        self.ret[0], self.done[0] = self.ret[k], self.done[k]
        self.k = 0

    def _resets(self, k: int, ended: np.ndarray | None = None) -> np.ndarray | int:
        """Each slot's reset steps among rows 1..k (one after each of its ends in rows 0..k-1), or 0 where none is;
        `ended`: the slots of the ends in rows 1..k when already known."""
        if not self.next_step:
            return 0
        if ended is None:
            return np.count_nonzero(self.done[:k], axis=0)
        return self.done[0] + np.bincount(ended, minlength=len(self.frames)) - self.done[k]

    def _frames_and_starts(self, steps: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each ended episode's slot frames at its end and at its start (the slot's end before, or `start`, which
        moves on). A slot's frames at row s are those at row 0 plus s, less its reset steps in rows 1..s: one per
        end of the slot in rows 0..s-1, i.e. the carried end of row 0 and the ends before this one."""
        order = np.argsort(slots.astype(self._key), kind="stable")  # by slot, in end order within a slot
        s = slots[order]
        first = np.empty(len(s), bool)  # the slot's first end here
        first[0] = True
        np.not_equal(s[1:], s[:-1], out=first[1:])
        heads = np.flatnonzero(first)  # index arithmetic, not boolean masks: a third of their time at 47k ends
        counts = np.diff(heads, append=len(s))
        f = self.frames[s] + steps[order]
        if self.next_step:
            f -= np.arange(len(s)) - np.repeat(heads, counts)  # the slot's ends before, here
            f -= self.done[0].take(s)
        before = np.empty_like(f)
        before[1:] = f[:-1]
        ends_of = s.take(heads)
        before[heads] = self.start.take(ends_of)
        self.start[ends_of] = f.take(heads + counts - 1)  # each slot's last end here
        frames, starts = np.empty_like(f), np.empty_like(f)
        frames[order], starts[order] = f, before
        return frames, starts

    def restart(self) -> None:
        """Every slot starts a new episode (an env reset): unread ends are flushed first, frames are kept."""
        self.flush()
        self.ret[0], self.done[0] = 0.0, False
        self.start[:] = self.frames

    @property
    def slot_frames(self) -> np.ndarray:
        """Each slot's frames in all so far."""
        return self.frames + self.k - self._resets(self.k)

    def restore_frames(self, frames: list[int]) -> None:
        """Take each slot's frames from a checkpoint (a fresh episode starts in every slot)."""
        self.flush()
        self.frames[:] = frames
        self.start[:] = frames
