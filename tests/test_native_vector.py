"""The native vector kind: gymnasium's numpy-vectorized CartPole as one LabEnv, against copies of CartPoleEnv.

Gymnasium guarantees identical trajectories for one body: CartPoleVectorEnv(num_envs=1) draws its start states
from the same seeded generator, in the same order, as CartPoleEnv. With more bodies one generator serves every
sub-env (copies each have their own), so only the episode statistics agree, which is what is checked there.
"""
from __future__ import annotations

import numpy as np
import pytest

from slm_lab_like.envs.base import Clock
from slm_lab_like.envs.gym_vector import GymVectorEnv
from slm_lab_like.envs.kinds.gym_native import make_native
from slm_lab_like.envs.make import make_gym
from slm_lab_like.envs.native_vector import GymNativeVectorEnv, copy_batch
from tests.helpers import train


def native(n: int, max_t: int | None = None) -> GymNativeVectorEnv:
    return GymNativeVectorEnv("CartPole-v1", lambda k: make_native("CartPole-v1", max_t, {}, k), n,
                              Clock(max_frame=10**9))


def copies(n: int, max_t: int | None = None) -> GymVectorEnv:
    return GymVectorEnv("CartPole-v1", lambda: make_gym("CartPole-v1", max_t), n, Clock(max_frame=10**9))


def test_one_body_native_and_copy_give_identical_trajectories() -> None:
    a, b = native(1, max_t=30), copies(1, max_t=30)
    a.reset(seed=7)
    b.reset(seed=7)
    rng = np.random.default_rng(0)
    for _ in range(400):
        if not a.block.acting[a.parity][0]:  # the native env's reset step: no action is used
            a.block.action[0] = 0
            a.step()
            np.testing.assert_array_equal(a.block.obs[a.parity], b.block.obs[b.parity])
            continue
        act = rng.integers(2)
        a.block.action[0] = b.block.action[0] = act
        a.step()
        b.step()
        assert [(e.ret, e.length, e.truncated) for e in a.flush_ends()] == [(e.ret, e.length, e.truncated) for e in b.flush_ends()]
        assert a.block.terminated[0] == b.block.terminated[0] and a.block.truncated[0] == b.block.truncated[0]
        if a.flush_ends():
            np.testing.assert_array_equal(a.block.final_of(1 - a.parity), b.block.final_of(1 - b.parity))
        else:
            np.testing.assert_array_equal(a.block.obs[a.parity], b.block.obs[b.parity])
        a.ended.clear()
        b.ended.clear()
    assert a.clock.frame == b.clock.frame


def episode_lengths(env: GymVectorEnv | GymNativeVectorEnv, steps: int) -> np.ndarray:
    env.reset(seed=3)
    rng = np.random.default_rng(1)
    lengths = []
    for _ in range(steps):
        env.block.action[:] = rng.integers(2, size=env.n_slots)
        env.step()
        lengths += [e.length for e in env.flush_ends()]
        env.ended.clear()
    return np.asarray(lengths)


def test_many_bodies_native_and_copies_agree_on_episode_statistics() -> None:
    a, b = episode_lengths(native(64), 600), episode_lengths(copies(64), 600)
    assert len(a) > 1000 and len(b) > 1000
    assert abs(a.mean() - b.mean()) < 0.05 * b.mean()  # random play: about 22 steps either way
    assert a.min() >= 8 and b.min() >= 8


def test_max_t_truncates_native_bodies_like_copies() -> None:
    a, b = episode_lengths(native(8, max_t=12), 200), episode_lengths(copies(8, max_t=12), 200)
    assert a.max() == b.max() == 12


def test_a_cartpole_spec_uses_the_native_kind_unless_told_otherwise() -> None:
    raw = {"agent": [{"algorithm": {"name": "Random"}}], "env": [{"name": "CartPole-v1", "max_frame": 1600}],
           "body": {"num": 16}, "meta": {"random_seed": 0}}
    space, result = train(raw)
    assert isinstance(space.env_space.envs[0], GymNativeVectorEnv)
    assert result.env_frames[0] >= 1600 and sum(len(m.rows) for m in result.metrics.values()) > 16
    raw["env"][0]["vector"] = "sync"
    space, _ = train(raw)
    assert isinstance(space.env_space.envs[0], GymVectorEnv)


@pytest.mark.parametrize("algorithm,memory", [("PPO", {"name": "OnPolicyBatch", "n_steps": 8}),
                                              ("DQN", {"name": "Replay", "capacity": 1000})])
def test_observation_statistics_count_each_acting_body_step_once(algorithm: str, memory: dict) -> None:
    """A native body's reset step shows the ended episode's final obs again, but the body does not act on it: the
    running observation statistics take only the rows that act, so they count exactly the agent's frames."""
    raw = {"agent": [{"name": "a", "algorithm": {"name": algorithm, "normalize_obs": True}, "memory": memory,
                      "net": {"name": "MLP", "hid_layers": [8]}}],
           "env": [{"name": "CartPole-v1", "max_frame": 1600, "vector": "native"}],
           "body": {"product": "outer", "num": 16}, "meta": {"random_seed": 0}}
    space, result = train(raw)
    (agent,) = space.agent_space.agents
    counted = agent.obs_norms[0].rms.count - 1e-4
    assert sum(result.env_episodes) > 16  # reset steps happened
    assert round(counted) == agent.frame == result.env_frames[0]


def test_a_native_step_hands_its_final_obs_and_completed_rows_without_copies() -> None:
    from slm_lab_like.aeb.space import AEBSpace
    from slm_lab_like.spec.load import validate

    raw = {"agent": [{"name": "random", "algorithm": {"name": "Random"}}],
           "env": [{"name": "CartPole-v1", "max_frame": 10**6, "vector": "native"}], "body": {"product": "outer", "num": 8}}
    space = AEBSpace.build(validate(raw, "final_obs"), 0)
    env, link = space.env_space.envs[0], space.agent_space.links[0]
    space.env_space.reset(0)
    ends = 0
    for _ in range(200):
        p = env.parity
        acted = env.blocks[0].acting[p].copy()
        link.act(p)
        env.step()
        done = env.blocks[0].terminated | env.blocks[0].truncated
        ending = env.blocks[0].obs[env.parity][done].copy()  # NEXT_STEP: the ending step returns the final obs
        trans = link.transitions[p]
        np.testing.assert_array_equal(trans.final_obs[done], ending)
        np.testing.assert_array_equal(space.data.by_env(0, "final_obs").array[done], ending)
        assert trans.completed.tolist() == acted.tolist() == space.data.by_env(0, "completed").array.tolist()
        ends += int(done.sum())
    assert ends > 20
    space.close()


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("shape", [(7, 4), (5000, 3), (9, 40), (6, 2, 3)])
def test_a_batch_is_copied_whole_whatever_its_memory_order(order: str, shape: tuple[int, ...]) -> None:
    """gymnasium's CartPoleVectorEnv returns its state transposed (column-major): copied column by column, the
    buffer gets exactly what a plain copy gives."""
    src = np.asarray(np.random.default_rng(0).normal(size=shape), np.float32, order=order)
    dst = np.zeros(shape, np.float32)
    copy_batch(dst, src)
    assert np.array_equal(dst, src) and dst.flags.c_contiguous


def test_cartpoles_obs_arrive_column_major_and_the_lab_reads_them_exactly() -> None:
    env = native(64)
    env.reset(seed=3)
    obs, *_ = env.venv.step(np.ones(64, np.int64))  # what the venv hands over: the layout copy_batch is for
    assert obs.flags.f_contiguous and not obs.flags.c_contiguous
    twin = native(64)
    twin.reset(seed=3)
    twin.block.action[:] = 1
    twin.step()
    assert np.array_equal(twin.block.obs[twin.parity], obs)
