"""Replay, prioritized replay and the on-policy batch on small hand-checked cases."""
from __future__ import annotations

import numpy as np
import pytest

from agents.memory import OnPolicyBatch, OnPolicyBatchConfig, PrioritizedReplay, PrioritizedReplayConfig, Replay, ReplayConfig, SumTree
from agents.schedule import Schedule


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
