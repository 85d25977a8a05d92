"""The envpool kind (`vector: "envpool"`): the LabEnv contract, episode ends and max_t as for gymnasium's native
vector envs, the same episode statistics as copies of gymnasium's CartPole, and one-line spec errors."""
from __future__ import annotations

import importlib.util

import pytest

from slm_lab_like.envs.checker import check_lab_env
from slm_lab_like.envs.kinds import envpool_vector
from slm_lab_like.envs.native_vector import GymNativeVectorEnv
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.load import validate
from tests.helpers import train
from tests.test_env_checker import maker
from tests.test_native_vector import copies, episode_lengths

# a mark, not importorskip: importing envpool costs every xdist worker 1.7 s of CPU at collection
pytestmark = pytest.mark.skipif(importlib.util.find_spec("envpool") is None, reason="envpool is not installed")


def pool(n: int, max_t: int | None = None) -> GymNativeVectorEnv:
    return maker(n, name="CartPole-v1", vector="envpool", max_t=max_t)()


@pytest.mark.parametrize("name, n, max_t", [("CartPole-v1", 4, 15), ("CartPole-v1", 16, None), ("Pendulum-v1", 2, 20)])
def test_envpool_envs_pass_check_lab_env(name: str, n: int, max_t: int | None) -> None:
    check_lab_env(maker(n, name=name, vector="envpool", max_t=max_t), steps=200)


def test_envpool_cartpole_and_gymnasium_copies_agree_on_episode_statistics() -> None:
    a, b = episode_lengths(pool(64), 600), episode_lengths(copies(64), 600)
    assert len(a) > 1000 and len(b) > 1000
    assert abs(a.mean() - b.mean()) < 0.05 * b.mean() and a.min() >= 8 and b.min() >= 8


def test_max_t_truncates_envpool_bodies() -> None:
    env = pool(8, max_t=12)
    env.reset(seed=0)
    truncated, lengths = [], []
    for _ in range(200):
        env.block.action[:] = 1 - env.block.action  # alternate pushes: pole stays up past 12 steps
        env.step()
        lengths += env.flush_ends().length.tolist()
        truncated += env.flush_ends().truncated.tolist()
        env.ended.clear()
    assert max(lengths) == 12 and all(t == (n == 12) for t, n in zip(truncated, lengths)) and any(truncated)
    env.close()


def test_a_spec_runs_on_envpool_and_counts_only_acting_frames() -> None:
    raw = {"agent": [{"algorithm": {"name": "Random"}}],
           "env": [{"name": "CartPole-v1", "max_frame": 3000, "vector": "envpool", "max_t": 40}],
           "body": {"num": 16}, "meta": {"random_seed": 0}}
    space, result = train(raw)
    env = space.env_space.envs[0]
    assert isinstance(env, GymNativeVectorEnv) and isinstance(env.venv, envpool_vector.EnvpoolVector)
    rows = [r for m in result.metrics.values() for r in m.rows]
    assert result.env_frames[0] >= 3000 and max(r["t"] for r in rows) <= 40
    assert sum(r["t"] for r in rows) <= result.env_frames[0] < sum(r["t"] for r in rows) + 16 * 40


@pytest.mark.parametrize("entry, message", [
    ({"name": "Nope-v0"}, r'^env\[0\]\.vector: envpool has no env "Nope-v0"; use "auto", "sync" or "async"$'),
    ({"name": "CartPole-v1", "kwargs": {"bogus": 1}},
     r'^env\[0\]\.kwargs: envpool cannot build "CartPole-v1": TypeError: .*bogus'),
])
def test_envpool_mistakes_are_one_line_spec_errors(entry: dict, message: str) -> None:
    raw = {"agent": [{"algorithm": {"name": "Random"}}], "env": [{"max_frame": 100, "vector": "envpool", **entry}]}
    with pytest.raises(SpecError, match=message):
        validate(raw, "x")


def test_without_envpool_installed_the_spec_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envpool_vector, "envpool_names", lambda: None)
    raw = {"agent": [{"algorithm": {"name": "Random"}}],
           "env": [{"name": "Acrobot-v1", "max_frame": 100, "vector": "envpool"}]}
    with pytest.raises(SpecError, match=r'^env\[0\]\.vector: envpool is not installed \(pip install'):
        validate(raw, "x")


def test_enjoy_draws_an_envpool_env(tmp_path, monkeypatch, capsys) -> None:
    """envpool draws its first env when made with a render_mode (as enjoy asks), a batch of one frame: enjoy writes
    its video as for gymnasium's envs (it said "render gave no rgb frame" before)."""
    from pathlib import Path

    from tests.test_eval_enjoy import frames_in, trained_dir
    from slm_lab_like.cli import main

    pytest.importorskip("imageio_ffmpeg")
    raw = {"agent": [{"name": "rnd", "algorithm": {"name": "Random"}}],
           "env": [{"name": "CartPole-v1", "max_frame": 200, "vector": "envpool"}],
           "body": {"num": 3}, "meta": {"random_seed": 1}}
    trial = trained_dir(tmp_path, raw)
    monkeypatch.delenv("DISPLAY", raising=False)
    capsys.readouterr()
    assert main(["enjoy", f"{trial}", "--episodes", "1", "-q"]) == 0
    out = capsys.readouterr().out
    assert "without pictures" not in out and "no rgb frame" not in out
    video = Path(next(line for line in out.splitlines() if line.startswith("video: ")).split(": ", 1)[1])
    assert video.name == "enjoy_e0.mp4" and frames_in(video) > 2
