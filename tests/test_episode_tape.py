"""The EpisodeTape reads the same episodes as counting them step by step, whenever it is read; a session that reads
its envs' tapes every few dozen steps writes the same rows as one that reads them every step."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slm_lab_like.analysis.metrics import COLUMNS, WALL_COLUMNS
from slm_lab_like.envs.episodes import EpisodeEnds
from slm_lab_like.envs.episodes import EpisodeTape
from tests.helpers import train


def reference(rewards: np.ndarray, term: np.ndarray, trunc: np.ndarray, next_step: bool) -> tuple[list, list]:
    """Ends counted one slot and one step at a time: (slot, return, length, cut, frames, env frame), and each
    slot's frames after each step."""
    steps, n = rewards.shape
    ret, t, frames, ended, clock = [0.0] * n, [0] * n, [0] * n, [False] * n, 0
    ends, history = [], []
    for s in range(steps):
        live = [not e for e in ended] if next_step else [True] * n
        clock += sum(live)
        for i in range(n):
            if ended[i]:
                ret[i], t[i] = 0.0, 0
            ret[i] += float(rewards[s, i])
            t[i] += live[i]
            frames[i] += live[i]
        for i in range(n):
            ended[i] = bool(term[s, i] or trunc[s, i])
            if ended[i]:
                ends.append((i, ret[i], t[i], bool(trunc[s, i] and not term[s, i]), frames[i], clock))
        history.append(list(frames))
    return ends, history


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 5), st.integers(1, 60), st.integers(2, 9), st.booleans(), st.integers(0, 2**32 - 1),
       st.lists(st.integers(0, 60), max_size=5))
def test_the_tape_reads_the_episodes_of_step_by_step_counting(n: int, steps: int, capacity: int, next_step: bool,
                                                              seed: int, reads: list[int]) -> None:
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(steps, n)) * 10.0 ** rng.integers(-3, 4, size=(steps, n))
    term, trunc = rng.random((steps, n)) < 0.15, rng.random((steps, n)) < 0.1
    if next_step:  # a NEXT_STEP env's reset step gives reward 0
        rewards[1:][term[:-1] | trunc[:-1]] = 0.0
    want, frames_at = reference(rewards, term, trunc, next_step)
    ends = EpisodeEnds()
    tape = EpisodeTape(n, ends, capacity, next_step)
    live = np.ones(n, bool)
    clock = 0
    for s in range(steps):
        clock += int(live.sum()) if next_step else n
        done = tape.record(rewards[s], term[s], trunc[s], clock)
        np.testing.assert_array_equal(done, term[s] | trunc[s])
        live = ~done
        if s in reads:
            tape.flush()
        assert tape.slot_frames.tolist() == frames_at[s]
    tape.flush()
    got = [(e.slot, e.ret, e.length, e.truncated, e.body_frame, e.env_frame) for e in ends]
    assert got == want  # returns to the last bit: the same additions in the same order
    assert tape.slot_frames.tolist() == frames_at[-1]


A2C = {"name": "a2c", "algorithm": {"name": "A2C"}, "memory": {"name": "OnPolicyBatch", "n_steps": 4},
       "net": {"name": "MLP", "hid_layers": [16]}}
RANDOM = {"name": "random", "algorithm": {"name": "Random"}}


@pytest.mark.parametrize("vector", ["native", "sync"])  # a tape; copies holding back what they append
@pytest.mark.parametrize("agent", [A2C, RANDOM], ids=["a2c", "random"])  # stepping its optimizer, or never
def test_reading_ends_lazily_writes_the_rows_of_reading_them_every_step(vector: str, agent: dict) -> None:
    def rows(target: float | None) -> dict:
        env = {"name": "CartPole-v1", "max_frame": 3000, "vector": vector}
        if target is not None:
            env["target_return"] = target  # a target (never reached here): the lab reads the ends every step
        raw = {"agent": [agent], "env": [env], "body": {"product": "outer", "num": 8}, "meta": {"random_seed": 3}}
        _, result = train(raw, seed=3)
        keep = [c for c in COLUMNS if c not in WALL_COLUMNS]
        return {c: [[None if r[k] != r[k] else r[k] for k in keep] for r in m.rows]  # nan loss as None
                for c, m in result.metrics.items()}

    lazy, eager = rows(None), rows(1e9)
    assert sum(len(r) for r in lazy.values()) > 100
    opt_step = [c for c in COLUMNS if c not in WALL_COLUMNS].index("opt_step")
    assert len({r[opt_step] for rs in lazy.values() for r in rs}) > (10 if agent is A2C else 0)
    assert lazy == eager


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.integers(1, 60), st.integers(2, 9), st.integers(0, 2**32 - 1),
       st.lists(st.integers(0, 60), max_size=5))
def test_dropped_ends_leave_no_row_and_move_their_slots_frames_on(n: int, steps: int, capacity: int, seed: int,
                                                                  reads: list[int]) -> None:
    """A fault's cut episodes (a lost judge: info["_dropped"]) are counted and left out; every other episode, and
    every slot's frames, are as if they had been recorded (the next episode starts where the dropped one was cut)."""
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(steps, n))
    term, trunc = rng.random((steps, n)) < 0.15, rng.random((steps, n)) < 0.1
    drop = rng.random((steps, n)) < 0.1
    trunc |= drop  # a dropped slot's episode ends there, truncated
    want, frames_at = reference(rewards, term, trunc, False)
    ended = [(s, i) for s in range(steps) for i in range(n) if term[s, i] or trunc[s, i]]  # the reference's order
    kept = [end for end, (s, i) in zip(want, ended) if not drop[s, i]]
    ends = EpisodeEnds()
    tape = EpisodeTape(n, ends, capacity)
    for s in range(steps):
        tape.record(rewards[s], term[s], trunc[s], (s + 1) * n, drop[s] if drop[s].any() else None)
        if s in reads:
            tape.flush()
    tape.flush()
    got = [(e.slot, e.ret, e.length, e.truncated, e.body_frame, e.env_frame) for e in ends]
    assert got == kept and tape.dropped == int(drop.sum())
    assert tape.slot_frames.tolist() == frames_at[-1]


@pytest.mark.parametrize("n, capacity", [(1, 1024), (64, 1024), (256, 256), (1024, 64), (16384, 64)])
def test_a_tape_of_few_slots_holds_more_steps_between_flushes(n: int, capacity: int) -> None:
    """A flush costs some 70 us whatever the slots: few slots flush every 1,024 / n * 64 steps, not every 64."""
    ends = EpisodeEnds()
    tape = EpisodeTape(n, ends)
    assert tape.capacity == capacity
    ones, no = np.ones(n, np.float32), np.zeros(n, bool)
    for step in range(capacity):
        tape.record(ones, no, no, step)
        assert tape.k == (step + 1) % capacity
