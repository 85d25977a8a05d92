"""Replay, prioritized replay and the on-policy batch on small hand-checked cases."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slm_lab_like.agents.memory import OnPolicyBatch, OnPolicyBatchConfig, PrioritizedReplay, PrioritizedReplayConfig, Replay, ReplayConfig, SumTree
from slm_lab_like.agents.memory.replay import NStepAccumulator, NStepRows
from slm_lab_like.agents.schedule import Schedule


def make_replay(capacity: int = 5, batch_size: int = 4, cls: type = Replay, **kw: object) -> Replay:
    cfg = (PrioritizedReplayConfig if cls is PrioritizedReplay else ReplayConfig)(capacity=capacity,
                                                                                  batch_size=batch_size, **kw)
    return cls(cfg, num_bodies=3, obs_shape=(2,), obs_dtype=np.float32, act_shape=(), act_dtype=np.int64, seed=0)


def add_step(mem: Replay, base: float) -> None:
    obs = np.array([[base, 0], [base + 1, 0], [base + 2, 0]], np.float32)
    mem.add(obs, np.array([0, 1, 2]), np.array([base, base + 1, base + 2]), obs + 100, np.array([False, True, False]))


def test_replay_ring_buffer_wraps_and_copies() -> None:
    mem = make_replay()
    obs = np.array([[0, 0], [1, 0], [2, 0]], np.float32)
    mem.add(obs, np.array([0, 1, 2]), np.array([0.0, 1.0, 2.0]), obs + 100, np.array([False, True, False]))
    obs[:] = -1  # the lab reuses its buffers: the memory must have copied
    assert len(mem) == 3
    np.testing.assert_array_equal(mem.obs[:3, 0], [0, 1, 2])
    np.testing.assert_array_equal(mem.terminated[:3], [0, 1, 0])
    add_step(mem, 10)  # 3 more rows into capacity 5: the sixth wraps to slot 0
    assert len(mem) == 5 and mem.pos == 1
    np.testing.assert_array_equal(mem.obs[:, 0], [12, 1, 2, 10, 11])
    np.testing.assert_array_equal(mem.next_obs[:, 0], [112, 101, 102, 110, 111])


def test_replay_samples_only_stored_rows() -> None:
    mem = make_replay(capacity=100, batch_size=32)
    add_step(mem, 0)
    batch = mem.sample()
    assert batch.obs.shape == (32, 2) and batch.actions.shape == (32,)
    assert set(batch.indices.tolist()) <= {0, 1, 2}
    np.testing.assert_array_equal(batch.rewards, batch.obs[:, 0])  # rows stay aligned across fields
    np.testing.assert_array_equal(batch.weights, np.ones(32))


def test_sum_tree_totals_and_search() -> None:
    tree = SumTree(5)
    assert tree.leaves == 8
    tree.set(np.array([0, 1, 2, 3]), np.array([1.0, 0.0, 3.0, 2.0]))
    assert tree.total == 6.0
    np.testing.assert_array_equal(tree.find(np.array([0.0, 0.99, 1.0, 3.99, 4.0, 5.99])), [0, 0, 2, 2, 3, 3])
    tree.set(np.array([2]), np.array([0.5]))
    assert tree.total == 3.5


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 70), st.lists(st.tuples(st.lists(st.integers(0, 69), max_size=12), st.floats(0.0, 10.0)),
                                    max_size=8))
def test_every_node_of_the_sum_tree_sums_its_children(capacity: int, writes: list) -> None:
    """Repeated leaves in one write (a batch's duplicate samples) leave every ancestor the sum of its children."""
    tree = SumTree(capacity)
    for leaves, value in writes:
        idx = np.array([leaf % capacity for leaf in leaves], np.int64)
        tree.set(idx, np.full(len(idx), value))
    internal = np.arange(1, tree.leaves)
    np.testing.assert_allclose(tree.tree[internal], tree.tree[2 * internal] + tree.tree[2 * internal + 1])


@pytest.mark.parametrize("cls", [Replay, PrioritizedReplay])
def test_adding_no_rows_changes_nothing(cls: type) -> None:
    """A turn-based step where no body finished a transition hands the replay zero rows."""
    mem = make_replay(cls=cls)
    add_step(mem, 0)
    total = mem.tree.total if cls is PrioritizedReplay else None
    mem.add(np.zeros((0, 2), np.float32), np.zeros(0, np.int64), np.zeros(0), np.zeros((0, 2), np.float32),
            np.zeros(0, bool))
    assert len(mem) == 3 and mem.pos == 3
    assert total is None or mem.tree.total == total


def test_prioritized_replay_samples_in_proportion_to_priority() -> None:
    mem = make_replay(capacity=8, batch_size=4000, cls=PrioritizedReplay, alpha=1.0, beta=1.0, eps=0.0)
    add_step(mem, 0)
    mem.update_priorities(np.array([0, 1, 2]), np.array([1.0, 0.0, 3.0]))
    batch = mem.sample()
    counts = np.bincount(batch.indices, minlength=3)
    assert counts[1] == 0
    assert counts[2] / counts[0] == pytest.approx(3.0, rel=0.15)
    # importance weights (N * P)^-beta normalised by their max: the rarer slot 0 gets weight 1, slot 2 gets 1/3
    np.testing.assert_allclose(batch.weights[batch.indices == 0], 1.0, rtol=1e-6)
    np.testing.assert_allclose(batch.weights[batch.indices == 2], 1.0 / 3.0, rtol=1e-6)


def test_prioritized_replay_new_rows_get_max_priority_and_beta_schedule() -> None:
    mem = make_replay(capacity=8, batch_size=10, cls=PrioritizedReplay, alpha=1.0,
                      beta=Schedule("linear", start=0.0, end=1.0, frames=100))
    add_step(mem, 0)
    mem.update_priorities(np.array([0, 1, 2]), np.array([5.0, 1.0, 1.0]))
    add_step(mem, 10)
    np.testing.assert_allclose(mem.tree.get(np.arange(3, 6)), 5.0 + 1e-6)
    np.testing.assert_array_equal(mem.sample(frame=0).weights, np.ones(10))  # beta 0: no correction


def test_prioritized_replay_new_error_enters_every_new_row_at_that_error() -> None:
    """SLM Lab's PER enters each new transition at error 1e5, however small the errors seen: its priority then
    dwarfs the stored ones', where the largest-seen rule gives it only the largest error's."""
    mem = make_replay(capacity=64, batch_size=64, cls=PrioritizedReplay, alpha=0.6, eps=1e-4, new_error=1e5)
    add_step(mem, 0)
    mem.update_priorities(np.array([0, 1, 2]), np.array([0.5, 2.0, 0.1]))
    add_step(mem, 10)
    np.testing.assert_allclose(mem.tree.get(np.arange(3, 6)), (1e5 + 1e-4) ** 0.6)
    np.testing.assert_allclose(mem.tree.get(np.arange(3)), (np.array([0.5, 2.0, 0.1]) + 1e-4) ** 0.6)
    assert np.count_nonzero(mem.sample().indices >= 3) >= 60  # 3 rows of ~1000 against 3 of ~1 each
    largest = make_replay(capacity=64, batch_size=64, cls=PrioritizedReplay, alpha=0.6, eps=1e-4)
    add_step(largest, 0)
    largest.update_priorities(np.array([0, 1, 2]), np.array([0.5, 2.0, 0.1]))
    add_step(largest, 10)
    np.testing.assert_allclose(largest.tree.get(np.arange(3, 6)), (2.0 + 1e-4) ** 0.6)


def test_on_policy_batch_fills_and_resets() -> None:
    mem = OnPolicyBatch(OnPolicyBatchConfig(n_steps=2), num_bodies=3, obs_shape=(4,), act_shape=(),
                        act_dtype=np.dtype(np.int64))
    for t in range(2):
        assert not mem.full
        obs = np.full((3, 4), float(t), np.float32)
        mem.add(obs, np.array([t, t, t]), np.full(3, t), np.array([False, t == 1, False]),
                np.zeros(3), np.zeros(3), obs + 1)
        obs[:] = -7  # the lab reuses its buffers: the memory must have copied
    assert mem.full
    np.testing.assert_array_equal(mem.obs[:, 0, 0], [0, 1])
    np.testing.assert_array_equal(mem.dones[:, 1], [False, True])
    np.testing.assert_array_equal(mem.last_obs, np.full((3, 4), 2.0))
    with pytest.raises(RuntimeError):
        mem.add(obs, np.zeros(3), np.zeros(3), np.zeros(3, bool), np.zeros(3), np.zeros(3), obs)
    mem.reset()
    assert not mem.full and mem.pos == 0


def nstep_step(acc: "NStepAccumulator", t: int, reward: list[float], term: list[bool], trunc: list[bool],
               bodies: "np.ndarray | None" = None) -> "NStepRows":
    """Step t of the bodies: obs = [t, body], next obs = [t + 1, body], true last obs [t + 1, body + 10] on an end."""
    ids = np.arange(acc.num_bodies) if bodies is None else np.asarray(bodies)
    obs = np.stack([np.full(len(ids), t), ids], 1).astype(np.float32)
    done = np.array(term) | np.array(trunc)
    nxt = np.stack([np.full(len(ids), t + 1), ids + 10 * done], 1).astype(np.float32)
    return acc.add(obs, ids * 0 + t, np.array(reward), nxt, np.array(term), np.array(trunc), bodies=bodies)


def rows_by_start(out: "NStepRows") -> dict[tuple[int, int], tuple[float, tuple[float, float], bool, float]]:
    """{(start step, body): (return, bootstrap obs, terminated, discount)}."""
    return {(int(o[0]), int(o[1])): (float(r), (float(n[0]), float(n[1])), bool(d), float(g))
            for o, r, n, d, g in zip(out.obs, out.rewards, out.next_obs, out.terminated, out.discounts)}


def test_nstep_returns_per_body_with_termination_and_truncation() -> None:
    """n = 3, gamma = 0.5, two bodies. Body 0 terminates at step 3, body 1 is truncated at step 4.

    body 0 rewards r0..r3 = 1, 2, 4, 8 (terminated after r3); body 1 rewards 1, 1, 1, 1, 1 (truncated after r4)."""
    acc = NStepAccumulator(3, 0.5, 2, (2,), np.float32)
    f = [False, False]
    assert len(nstep_step(acc, 0, [1, 1], f, f).rewards) == 0
    assert len(nstep_step(acc, 1, [2, 1], f, f).rewards) == 0
    out = rows_by_start(nstep_step(acc, 2, [4, 1], f, f))  # window full: the step-0 transitions leave
    assert out == {(0, 0): (1 + 0.5 * 2 + 0.25 * 4, (3, 0), False, 0.125),
                   (0, 1): (1 + 0.5 + 0.25, (3, 1), False, 0.125)}
    out = rows_by_start(nstep_step(acc, 3, [8, 1], [True, False], f))
    # body 0 ends: steps 1, 2, 3 leave with 3, 2 and 1 rewards, bootstrap obs = the true last obs, cut
    assert out == {(1, 0): (2 + 0.5 * 4 + 0.25 * 8, (4, 10), True, 0.125),
                   (2, 0): (4 + 0.5 * 8, (4, 10), True, 0.25),
                   (3, 0): (8.0, (4, 10), True, 0.5),
                   (1, 1): (1.75, (4, 1), False, 0.125)}
    out = rows_by_start(nstep_step(acc, 4, [100, 1], [False, False], [False, True]))
    # body 0 starts afresh (nothing carried over the episode end); body 1 is truncated: its pending steps
    # 2, 3, 4 leave, bootstrapped (not cut) from the true last obs with gamma^k
    assert out == {(2, 1): (1.75, (5, 11), False, 0.125),
                   (3, 1): (1.5, (5, 11), False, 0.25),
                   (4, 1): (1.0, (5, 11), False, 0.5)}
    out = rows_by_start(nstep_step(acc, 5, [0, 3], f, f))
    assert out == {}
    out = rows_by_start(nstep_step(acc, 6, [0, 5], f, f))
    assert out == {(4, 0): (100.0, (7, 0), False, 0.125)}


def test_nstep_one_is_plain_and_bodies_keep_their_own_streams() -> None:
    acc = NStepAccumulator(1, 0.9, 2, (2,), np.float32)
    out = rows_by_start(nstep_step(acc, 0, [3, 4], [False, True], [False, False]))
    assert out == {(0, 0): (3.0, (1, 0), False, pytest.approx(0.9)), (0, 1): (4.0, (1, 11), True, pytest.approx(0.9))}
    # turn-based: only body 1 steps at t = 0 and 1, then only body 0; streams do not mix
    acc = NStepAccumulator(2, 0.5, 2, (2,), np.float32)
    one, zero = np.array([1]), np.array([0])
    assert len(nstep_step(acc, 0, [1], [False], [False], one).rewards) == 0
    assert rows_by_start(nstep_step(acc, 1, [2], [False], [False], one)) == {(0, 1): (2.0, (2, 1), False, 0.25)}
    assert len(nstep_step(acc, 2, [4], [False], [False], zero).rewards) == 0
    assert rows_by_start(nstep_step(acc, 3, [8], [False], [False], zero)) == {(2, 0): (8.0, (4, 0), False, 0.25)}


def test_replay_keeps_per_row_discounts() -> None:
    mem = make_replay(capacity=10, batch_size=6)
    add_step(mem, 0)
    assert mem.sample().discounts is None  # plain 1-step rows: the algorithm's gamma applies
    obs = np.zeros((3, 2), np.float32)
    mem.add(obs, np.zeros(3), np.ones(3), obs, np.zeros(3, bool), discounts=np.array([0.5, 0.25, 0.125]))
    np.testing.assert_array_equal(mem.discounts[:6], [1, 1, 1, 0.5, 0.25, 0.125])
    batch = mem.sample()
    np.testing.assert_array_equal(batch.discounts, mem.discounts[batch.indices])
