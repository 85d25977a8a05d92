"""Spread (cooperative navigation, MPE's simple_spread kind): PettingZoo API, the lab's env contract, multi-step
determinism, the shared reward and the collision penalty by hand, MPE's dynamics, the observation layout."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
from pettingzoo.test import parallel_api_test, parallel_seed_test  # noqa: E402

from slm_lab_like.envs.base import Clock, LabEnv  # noqa: E402
from slm_lab_like.envs.checker import check_lab_env  # noqa: E402
from slm_lab_like.envs.games.spread import SpreadEnv, SpreadWorld  # noqa: E402
from slm_lab_like.envs.make import multiagent_api  # noqa: E402
from slm_lab_like.envs.registry import adapter_for  # noqa: E402
from slm_lab_like.spec.schema import EnvSpec  # noqa: E402

NOOP, LEFT, RIGHT, DOWN, UP = range(5)


def test_parallel_api_and_seed() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parallel_api_test(SpreadEnv(), num_cycles=300)
        parallel_api_test(SpreadEnv(n_agents=4, n_landmarks=2, sight=0.5, max_cycles=10), num_cycles=100)
        parallel_seed_test(SpreadEnv, num_cycles=300)


@pytest.mark.parametrize("n", [1, 3])
def test_passes_check_lab_env_through_its_adapter(n: int) -> None:
    spec = EnvSpec(name="spread", max_frame=10**9, max_t=15, kwargs={"n_agents": n})
    adapter = adapter_for(spec)
    plan = adapter.plan([{} for _ in range(n)], [f"env[0].bodies[{i}]" for i in range(n)])

    def make() -> LabEnv:
        return adapter.build(n, Clock(max_frame=10**9), plan)

    assert multiagent_api("spread") == "parallel"
    check_lab_env(make, steps=200)


def _trajectory(seed: int, steps: int = 200) -> list[Any]:
    env = SpreadEnv(max_cycles=25)
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(7)
    trace: list[Any] = [{a: o.tobytes() for a, o in obs.items()}]
    for _ in range(steps):
        if not env.agents:
            obs, _ = env.reset()
            trace.append({a: o.tobytes() for a, o in obs.items()})
        out = env.step({a: int(rng.integers(5)) for a in env.agents})
        trace.append(({a: o.tobytes() for a, o in out[0].items()}, out[1], out[2], out[3]))
    return trace


def test_multi_step_determinism_across_episodes() -> None:
    assert _trajectory(3) == _trajectory(3)
    assert _trajectory(3) != _trajectory(4)


def test_shared_reward_is_coverage_minus_collisions_by_hand() -> None:
    env = SpreadEnv(n_agents=3, collision_penalty=2.0)
    env.reset(seed=0)
    w = env.world
    w.landmarks = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    w.pos = np.array([[0.0, 0.1], [0.1, 0.1], [0.9, 0.9]])  # agents 0 and 1 overlap (0.1 < 2 * 0.15)
    w.vel = np.zeros((3, 2))
    _, rew, term, trunc, _ = env.step({a: NOOP for a in env.agents})
    cover = 0.1 + np.hypot(0.9, 0.1) + 0.9  # the landmarks' nearest agents: 0, 1 (or 2), 0
    assert list(rew.values()) == pytest.approx([-cover - 2.0] * 3)
    assert not any(term.values()) and not any(trunc.values()) and w.collisions() == 1


def test_dynamics_follow_mpe_damping_and_push() -> None:
    w = SpreadWorld(n_agents=2)
    w.reset(np.random.default_rng(0))
    start = w.pos.copy()
    w.step(np.array([RIGHT, UP]))
    np.testing.assert_allclose(w.vel, [[0.5, 0.0], [0.0, 0.5]])  # accel 5 * dt 0.1
    np.testing.assert_allclose(w.pos - start, [[0.05, 0.0], [0.0, 0.05]])
    w.step(np.array([NOOP, NOOP]))
    np.testing.assert_allclose(w.vel, [[0.375, 0.0], [0.0, 0.375]])  # damped by 0.25
    w.step(np.array([LEFT, DOWN]))
    np.testing.assert_allclose(w.vel, [[0.375 * 0.75 - 0.5, 0.0], [0.0, 0.375 * 0.75 - 0.5]])


def test_observation_layout_and_sight() -> None:
    env = SpreadEnv(n_agents=3, n_landmarks=2)
    obs, _ = env.reset(seed=1)
    w = env.world
    assert env.observation_space("agent_0").shape == (4 + 2 * 2 + 2 * 2,)
    o = obs["agent_1"]
    np.testing.assert_allclose(o[0:2], w.vel[1])
    np.testing.assert_allclose(o[2:4], w.pos[1], rtol=1e-6)
    np.testing.assert_allclose(o[4:8], (w.landmarks - w.pos[1]).ravel(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(o[8:12], (w.pos[[0, 2]] - w.pos[1]).ravel(), rtol=1e-5, atol=1e-6)
    near = SpreadEnv(n_agents=3, n_landmarks=2, sight=1e-3)
    obs, _ = near.reset(seed=1)
    assert not obs["agent_1"][8:].any()  # teammates out of sight
    np.testing.assert_allclose(obs["agent_1"][4:8], o[4:8], rtol=1e-6)  # the landmarks are always seen
    w = near.world
    w.pos = np.array([[0.0, 0.0], [0.2, 0.0], [0.9, 0.0]])
    w.sight = 0.5  # agent 1 sees agent 0 (0.2 away), not agent 2 (0.7 away)
    np.testing.assert_allclose(w.observations()[1][8:12], [-0.2, 0.0, 0.0, 0.0], atol=1e-6)


def test_agent_id_appends_the_one_hot_of_the_agents_index() -> None:
    env = SpreadEnv(n_agents=3, agent_id=True)
    obs, _ = env.reset(seed=2)
    assert env.observation_space("agent_0").shape == (4 + 2 * 3 + 2 * 2 + 3,)
    for i in range(3):
        np.testing.assert_array_equal(obs[f"agent_{i}"][-3:], np.eye(3)[i])


def test_everyone_truncated_after_max_cycles() -> None:
    env = SpreadEnv(max_cycles=4)
    env.reset(seed=0)
    for t in range(4):
        _, _, term, trunc, _ = env.step({a: NOOP for a in env.agents})
        assert not any(term.values()) and all(trunc.values()) == (t == 3)
    assert env.agents == []


@pytest.mark.parametrize("kwargs, match", [
    ({"n_agents": 0}, "n_agents"), ({"n_landmarks": 0}, "n_landmarks"), ({"max_cycles": 0}, "max_cycles"),
    ({"sight": 0.0}, "sight"), ({"render_mode": "rgb_array"}, "render_mode")])
def test_bad_arguments_are_one_clear_error(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SpreadEnv(**kwargs)


def test_bad_actions_and_render() -> None:
    env = SpreadEnv(render_mode="ansi")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="agent_0: action must be an int"):
        env.step({"agent_0": 7})
    with pytest.raises(ValueError, match="unknown player"):
        env.step({"agent_9": 0})
    picture = env.render()
    assert isinstance(picture, str) and picture.count("\n") == 20
