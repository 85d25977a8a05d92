"""The session loop: clocks and budgets, per-body counts, data views, truncation, determinism, outputs."""
from __future__ import annotations

import csv
import json

import gymnasium as gym
import numpy as np
import pytest
import torch

from slm_lab_like.envs.base import Clock
from slm_lab_like.envs.gym_vector import GymAsyncVectorEnv, GymVectorEnv
from slm_lab_like.envs.make import make_gym
from slm_lab_like.aeb.space import AEBSpace
from slm_lab_like.analysis.metrics import COLUMNS, WALL_COLUMNS, read_csv
from slm_lab_like.experiment.session import Session
from slm_lab_like.experiment.trial import run_trial
from slm_lab_like.spec.load import validate
from tests.conftest import random_spec


def run(raw: dict, seed: int = 3, out_dir=None):
    return Session(validate(raw, "t"), seed=seed, out_dir=out_dir).run()


def test_2_agents_2_envs_3_bodies_counts_match_env_clocks() -> None:
    raw = random_spec(n_agents=2, n_envs=2, num=3, max_frame=3000)
    raw["env"][1] = {"name": "Acrobot-v1", "max_episode": 12, "max_t": 60}
    result = run(raw)
    assert sorted(result.metrics) == [(a, e, b) for a in range(2) for e in range(2) for b in range(3)]
    for e, n_slots in enumerate([6, 6]):
        bodies = [m for c, m in result.metrics.items() if c[1] == e]
        body_frames = result.env_frames[e] // n_slots
        assert result.env_frames[e] == body_frames * n_slots
        assert sum(len(m.rows) for m in bodies) == result.env_episodes[e]
        for m in bodies:
            assert all(r["frame"] <= body_frames for r in m.rows)
            assert [r["episode"] for r in m.rows] == list(range(1, len(m.rows) + 1))
            assert all(r["env_frame"] <= result.env_frames[e] for r in m.rows)
    assert result.env_frames[0] == 3000  # 6 slots divide 3000: no overshoot
    assert result.env_episodes[1] >= 12 and result.env_episodes[1] - 12 < 6  # stops on the step that reaches it
    acrobot = [r for c, m in result.metrics.items() if c[1] == 1 for r in m.rows]
    assert all(r["t"] <= 60 for r in acrobot) and any(r["t"] == 60 for r in acrobot)


def test_frame_budget_overshoot_is_less_than_one_step() -> None:
    copies = random_spec(num=4, max_frame=1001)
    copies["env"][0]["vector"] = "sync"
    assert run(copies).env_frames == [1004]
    native = run(random_spec(num=4, max_frame=1001)).env_frames[0]  # slots resetting do not count
    assert 1001 <= native < 1005


def test_episode_returns_equal_lengths_in_cartpole() -> None:
    result = run(random_spec(num=2, max_frame=2000))
    rows = [r for m in result.metrics.values() for r in m.rows]
    assert rows and all(r["return"] == r["t"] for r in rows)


def test_body_frame_and_episode_totals() -> None:
    result = run(random_spec(num=1, max_frame=500))
    (m,) = result.metrics.values()
    assert sum(r["t"] for r in m.rows) <= 500
    assert m.rows[-1]["frame"] == sum(r["t"] for r in m.rows)


def test_max_t_truncates_and_keeps_final_obs() -> None:
    env = GymVectorEnv("CartPole-v1", lambda: make_gym("CartPole-v1"), 2, Clock(max_frame=100))
    env.max_t = 3
    env.reset(seed=0)
    blk = env.block
    before = blk.obs[env.parity].copy()
    for _ in range(3):
        blk.action[:] = 0
        env.step()
    assert blk.truncated.all() and not blk.terminated.any()
    assert [e.length for e in env.flush_ends()] == [3, 3] and all(e.truncated for e in env.flush_ends())
    assert not np.array_equal(blk.final_obs, blk.obs[env.parity])  # final obs kept apart from the reset obs
    assert not np.array_equal(blk.final_obs, before)
    env.close()
    env.close()


def test_async_vector_env_matches_sync() -> None:
    def trace(cls):
        env = cls("CartPole-v1", lambda: make_gym("CartPole-v1"), 3, Clock(max_frame=10**6))
        env.reset(seed=11)
        rng = np.random.default_rng(0)
        out = []
        for _ in range(60):
            env.block.action[:] = rng.integers(0, 2, 3)
            env.step()
            out.append((env.block.obs[env.parity].copy(), env.block.reward.copy(), env.block.terminated.copy(),
                        env.block.final_obs.copy() * env.block.terminated[:, None]))
        ended = [(e.slot, e.ret, e.length) for e in env.flush_ends()]
        env.close()
        return out, ended

    sync, sync_ended = trace(GymVectorEnv)
    asyn, async_ended = trace(GymAsyncVectorEnv)
    assert sync_ended == async_ended and sync_ended
    for a, b in zip(sync, asyn):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y)


def test_same_seed_same_metrics_csv(tmp_path) -> None:
    raw = random_spec(n_agents=2, n_envs=1, num=2, max_frame=1500)
    run(raw, seed=5, out_dir=tmp_path / "a")
    run(raw, seed=5, out_dir=tmp_path / "b")
    run(raw, seed=6, out_dir=tmp_path / "c")
    files = sorted(p.name for p in (tmp_path / "a").glob("metrics_*.csv"))
    assert files == [f"metrics_a{a}_e0_b{b}.csv" for a in range(2) for b in range(2)]
    keep = [c for c in COLUMNS if c not in WALL_COLUMNS]

    def table(d):
        with_text = [list(csv.DictReader(open(tmp_path / d / f))) for f in files]
        return [[{k: r[k] for k in keep} for r in rows] for rows in with_text]

    assert table("a") == table("b")
    assert table("a") != table("c")


def test_dataspace_views_by_agent_and_env() -> None:
    raw = random_spec(n_agents=2, n_envs=2, num=[1, 2])
    space = AEBSpace.build(validate(raw, "t"), seed=0)
    try:
        space.env_space.reset(0)
        by_env = space.data.by_env(1, "obs")
        assert list(by_env) == [(0, 1, 0), (0, 1, 1), (1, 1, 0), (1, 1, 1)]
        by_agent = space.data.by_agent(1, "obs")
        assert list(by_agent) == [(1, 0, 0), (1, 1, 0), (1, 1, 1)]
        np.testing.assert_array_equal(by_agent[(1, 1, 1)], by_env[(1, 1, 1)])
        env1 = space.env_space.envs[1]
        np.testing.assert_array_equal(by_env[(1, 1, 0)], env1.block.obs[env1.parity][2])
        # groups are views into the env buffers: an agent's action lands in its bodies' env slots
        link = next(ln for ln in space.agent_space.links if ln.agent is space.agent_space.agents[1] and ln.env is env1)
        link.action[...] = [1, 0]
        assert space.data.by_env(1, "action")[(1, 1, 0)] == 1 and env1.block.action[3] == 0
        assert space.agent_space.bodies[(1, 1, 1)].slot == 3
    finally:
        space.close()


def test_trial_runs_sessions_in_processes_and_writes_outputs(tmp_path) -> None:
    raw = random_spec(num=2, max_frame=400)
    raw["meta"]["max_session"] = 2
    result = run_trial(validate(raw, "t"), tmp_path)
    assert [s.seed for s in result.sessions] == [7, 8]
    out = result.out_dir
    assert (out / "spec.json").exists() and (out / "trial.json").exists() and (out / "trial_returns.png").exists()
    for i in range(2):
        d = out / f"session_{i}"
        assert (d / "summary.json").exists() and (d / "session_returns.png").exists()
        rows = read_csv(d / "metrics_a0_e0_b1.csv")
        assert rows and set(rows[0]) == set(COLUMNS)
        state = torch.load(d / "agent_a0.pt", weights_only=True)
        assert state["frame"] == result.sessions[i].env_frames[0]
    assert not list(out.rglob("*.tmp"))


def test_session_workers_import_modules_from_where_the_lab_imports_them_now(tmp_path, monkeypatch) -> None:
    """Workers come from a fork server started by the first pool; a user's module in a directory added to the path
    since (another project, a notebook's sys.path.append) still imports in them: each takes the lab's path at its
    start, as multiprocessing hands it over."""
    raw = random_spec(num=1, max_frame=100)
    raw["meta"]["max_session"] = 2
    run_trial(validate(raw, "t"), tmp_path / "first")  # the pool's server is up (in this process, from here on)
    later = tmp_path / "later"
    later.mkdir()
    (later / "late_envs.py").write_text("from gymnasium.envs.classic_control.cartpole import CartPoleEnv as Late\n")
    monkeypatch.syspath_prepend(str(later))
    raw["env"][0]["name"] = "late_envs:Late"
    result = run_trial(validate(raw, "t"), tmp_path / "second")
    assert [s.env_frames for s in result.sessions] == [[100], [100]]


def test_user_env_by_module_class() -> None:
    raw = random_spec(max_frame=100)
    raw["env"][0]["name"] = "gymnasium.envs.classic_control.cartpole:CartPoleEnv"
    raw["env"][0]["max_t"] = 10
    result = run(raw)
    assert all(r["t"] <= 10 for m in result.metrics.values() for r in m.rows)


def test_unflattenable_observation_space_is_a_clear_error() -> None:
    class TextObs(gym.Env):
        observation_space = gym.spaces.Text(5)
        action_space = gym.spaces.Discrete(2)

    with pytest.raises(ValueError, match=r'env "x": observation space Text cannot be flattened'):
        GymVectorEnv("x", TextObs, 1, Clock(max_frame=1))


def test_target_return_ends_the_budget_early() -> None:
    raw = random_spec(num=2, max_frame=100_000)
    raw["env"][0]["target_return"] = 15.0  # random play averages about 22 on CartPole
    result = run(raw)
    assert result.env_frames[0] < 100_000
    frame, _ = result.first_reach(0, 0, 15.0)
    assert frame == result.env_frames[0]
    assert sum(len(m.rows) for m in result.metrics.values()) == 100
    raw["env"][0]["target_return"] = 1000.0
    assert run(raw).env_frames[0] == 100_000


def test_a_target_counts_once_every_body_has_ended_an_episode() -> None:
    """With more bodies than the 100-episode window, the first 100 ends are the shortest episodes: the target is
    reached only once every body has ended one (random play's short episodes alone would end it at once)."""
    raw = random_spec(num=160, max_frame=1_000_000)
    raw["env"][0]["target_return"] = 5.0
    result = run(raw)
    assert result.env_frames[0] < 1_000_000
    assert all(len(m.rows) >= 1 for m in result.metrics.values())


def test_progress_lines_and_checkpoints_come_every_so_many_env_frames_in_a_turn_based_game(tmp_path) -> None:
    """In a turn-based game a step's frames are its movers', half its bodies: log_frequency and checkpoint_frequency
    still count the frames max_frame and the progress lines count (they came twice as often, at half the frames)."""
    raw = {"agent": [{"name": "r", "algorithm": {"name": "Random"}}],
           "env": [{"name": "connect_four_batch", "max_frame": 2000}], "body": {"product": "outer", "num": 16},
           "meta": {"random_seed": 1, "log_frequency": 500, "checkpoint_frequency": 700, "checkpoint_keep": True}}
    lines: list[int] = []
    Session(validate(raw, "t"), 0, 3, tmp_path, on_progress=lambda frame, wall, metrics: lines.append(frame)).run()
    assert [f // 500 for f in lines] == [1, 2, 3, 4] and all(f % 500 < 8 for f in lines[:3]) and lines[-1] == 2000
    kept = [k["frame"] for k in json.loads((tmp_path / "checkpoint.json").read_text())["kept"]]
    assert [f // 700 for f in kept[:2]] == [1, 2] and all(f % 700 < 8 for f in kept[:2]) and kept[-1] == 2000
