"""The vector client: N copies hosted by one judge, stepped in one round trip (gymnasium's VectorEnv, SAME_STEP)."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from slm_lab_like.remote import RemoteError, judge_for, serve, shutdown, spawn_judge, stop_judge
from slm_lab_like.remote.vector_client import RemoteVecEnv

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def cartpole():
    """A CartPole-v1 judge subprocess."""
    proc, address = spawn_judge("CartPole-v1")
    try:
        yield address
    finally:
        stop_judge(proc)


def local_copies(n: int, max_t: int | None = None) -> SyncVectorEnv:
    return SyncVectorEnv([lambda: gym.make("CartPole-v1", max_episode_steps=max_t)] * n,
                         autoreset_mode=AutoresetMode.SAME_STEP)


@pytest.mark.parametrize("max_t,lane", [(None, True), (7, True), (None, False)])
def test_vector_client_equals_local_copies_step_for_step(cartpole, max_t, lane):
    """Same seeds and actions: the same observations, rewards, flags and final observations as gymnasium's own
    SAME_STEP vector env over local copies, episode ends included (by the lane, and on ZeroMQ alone)."""
    remote, local = RemoteVecEnv(cartpole, 4, max_t=max_t, timeout=10, lane=lane), local_copies(4, max_t)
    assert (remote._link.lane is not None) == lane
    try:
        assert remote.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        assert remote.observation_space == local.observation_space and remote.action_space == local.action_space
        r_obs, _ = remote.reset(seed=3)
        l_obs, _ = local.reset(seed=3)
        assert np.array_equal(r_obs, l_obs) and r_obs.dtype == np.float32 and r_obs.flags.writeable
        actions = np.random.default_rng(0).integers(2, size=(300, 4))
        ends = 0
        for a in actions:
            r, lo = remote.step(a), local.step(a)
            for x, y in zip(r[:4], lo[:4]):
                assert np.array_equal(x, y)
            assert set(r[4]) == set(lo[4])
            if "final_obs" in lo[4]:
                ends += int(lo[4]["_final_obs"].sum())
                assert np.array_equal(r[4]["_final_obs"], lo[4]["_final_obs"])
                for i in np.flatnonzero(lo[4]["_final_obs"]):
                    assert np.array_equal(r[4]["final_obs"][i], lo[4]["final_obs"][i])
        assert ends >= 8
    finally:
        remote.close()
        local.close()


def test_one_session_of_n_copies_and_typed_errors():
    """The judge holds one session of 4 env instances for the client (they count against max_sessions); a bad
    action anywhere is invalid_action and steps no copy; seeds may be one per copy."""
    address = serve("CartPole-v1", max_sessions=5)
    try:
        venv = RemoteVecEnv(address, 4, timeout=5)
        (session,) = judge_for(address).sessions.values()
        assert session.size == 4
        with pytest.raises(RemoteError) as err:
            RemoteVecEnv(address, 2, timeout=5, connect_timeout=0.5)
        assert err.value.code == "full"
        with pytest.raises(RemoteError, match="step_before_reset"):
            venv.step(np.zeros(4, np.int64))
        obs, _ = venv.reset(seed=[5, 6, None, 8])
        local = gym.make("CartPole-v1")
        assert np.array_equal(obs[1], local.reset(seed=6)[0])
        with pytest.raises(RemoteError, match="invalid_action"):
            venv.step(np.array([0, 1, 2, 0]))
        with pytest.raises(RemoteError, match="invalid_action"):
            venv.step(np.array([0.5, 1, 1, 0]))
        assert all(t == 0 for t in session.t)
        assert venv.step([1, 1, 0, 0])[0].shape == (4, 4)
        venv.close()
        assert not judge_for(address).sessions
    finally:
        shutdown(address)


def test_infos_and_other_spaces_travel_through_msgpack():
    """An env with infos and Discrete observations (FrozenLake) keeps its infos, in gymnasium's vector layout."""
    address = serve("FrozenLake-v1")
    try:
        remote, local = RemoteVecEnv(address, 3, timeout=5), SyncVectorEnv(
            [lambda: gym.make("FrozenLake-v1")] * 3, autoreset_mode=AutoresetMode.SAME_STEP)
        r, lo = remote.reset(seed=1), local.reset(seed=1)
        assert np.array_equal(r[0], lo[0]) and np.array_equal(r[1]["prob"], lo[1]["prob"])
        for a in np.random.default_rng(1).integers(4, size=(40, 3)):
            r, lo = remote.step(a), local.step(a)
            assert all(np.array_equal(x, y) for x, y in zip(r[:4], lo[:4]))
            assert np.array_equal(r[4]["prob"], lo[4]["prob"]) and set(r[4]) == set(lo[4])
        remote.close()
    finally:
        shutdown(address)


def test_a_multi_agent_judge_refuses_vector_sessions():
    address = serve("tag_arena", allow_claim=True)
    try:
        with pytest.raises(RemoteError) as err:
            RemoteVecEnv(address, 2, timeout=5)
        assert err.value.code == "unsupported"
    finally:
        shutdown(address)


def test_sb3_a2c_through_the_vector_client_is_the_same_run_as_local_envs(cartpole):
    """Stable-Baselines3 A2C on 4 copies trains to the same parameters through one vector client as on local envs."""
    pytest.importorskip("stable_baselines3")
    from bench.remote_overhead import sb3_a2c

    local = sb3_a2c("local", None, 400)
    remote = sb3_a2c("vector", cartpole, 400)
    assert remote[1] == local[1]
