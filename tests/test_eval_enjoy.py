"""Evaluation mode of agents (deterministic, no learning), `eval DIR` reports and `enjoy DIR` videos."""
from __future__ import annotations

import json
import importlib.util
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from slm_lab_like.aeb.space import AEBSpace
from slm_lab_like.cli import main
from slm_lab_like.spec.load import validate
from tests.helpers import as_if_trained_on_a_gpu

NET = {"name": "MLP", "hid_layers": [16]}


class Corridor(gym.Env):
    """A tiny env that renders rgb frames: walk right (action 1) to the end of a 5-cell corridor."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0.0, 5.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.pos = self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.pos = self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.pos, self.t = self.pos + int(action), self.t + 1
        return np.array([self.pos], np.float32), float(action), self.pos >= 5, False, {}

    def render(self) -> np.ndarray:
        frame = np.zeros((16, 24, 3), np.uint8)
        frame[:, : 4 * self.pos + 4] = 255
        frame[0, 0, 1] = 10 * self.t % 256  # every step looks different
        return frame


PPO_AND_RANDOM = {"agent": [{"name": "ppo", "algorithm": {"name": "PPO", "n_epochs": 2},
                             "memory": {"name": "OnPolicyBatch", "n_steps": 32}, "net": NET},
                            {"name": "rnd", "algorithm": {"name": "Random"}}],
                  "env": [{"name": "CartPole-v1", "max_frame": 600}], "body": {"num": 3},
                  "meta": {"random_seed": 1, "max_session": 1}}


def trained_dir(tmp_path: Path, raw: dict) -> Path:
    spec_file = tmp_path / "s.json"
    spec_file.write_text(json.dumps(raw))
    assert main([str(spec_file), "--out", str(tmp_path / "out"), "-q"]) == 0
    return next((tmp_path / "out").iterdir())


@pytest.mark.parametrize("algorithm", [{"name": "PPO"}, {"name": "A2C"}, {"name": "REINFORCE"},
                                       {"name": "DQN", "epsilon": 1.0}])
def test_eval_mode_acts_deterministically_and_greedily(algorithm: dict) -> None:
    spec = validate({"agent": [{"name": "x", "algorithm": algorithm, "net": NET}],
                     "env": [{"name": "CartPole-v1", "max_frame": 10_000}], "body": {"num": 64}}, "t")
    space = AEBSpace.build(spec, 0)
    try:
        agent = space.agent_space.agents[0]
        obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
        agent.set_training(False)
        a1, a2 = agent.act(0, obs), agent.act(0, obs)
        assert np.array_equal(a1, a2)
        net = agent.q_net if hasattr(agent, "q_net") else agent.policy.actor
        with torch.no_grad():
            assert np.array_equal(a1, net(torch.from_numpy(obs), 0)[0].argmax(1).numpy())
        agent.set_training(True)
        assert not all(np.array_equal(agent.act(0, obs), a1) for _ in range(5))  # exploring again
    finally:
        space.close()


def test_eval_at_dir_writes_a_report_per_pair(tmp_path: Path, capsys) -> None:
    trial = trained_dir(tmp_path, PPO_AND_RANDOM)
    capsys.readouterr()
    assert main(["eval", f"{trial}", "--episodes", "7", "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and "report:" in lines[-1]
    report = json.loads((trial / "eval.json").read_text())
    (session,) = report["sessions"]
    assert session["checkpoint"] == "final" and session["seed"] != 1
    assert [p["agent"] for p in session["pairs"]] == ["ppo", "rnd"]
    for p in session["pairs"]:
        assert p["episodes"] == 7 == len(p["returns"]) == len(p["lengths"])
        assert p["return"]["min"] <= p["return"]["mean"] <= p["return"]["max"]
        assert p["returns"] == [float(n) for n in p["lengths"]]  # CartPole: return = length
    assert main(["eval", f"{trial}", "--episodes", "7", "-q"]) == 0
    again = json.loads((trial / "eval.json").read_text())
    assert again["sessions"][0]["pairs"][0]["returns"] == session["pairs"][0]["returns"]  # deterministic


@pytest.mark.skipif(torch.cuda.is_available(), reason="plays a GPU run where there is no CUDA")
def test_a_run_trained_on_a_gpu_plays_on_the_cpu_and_goes_on_only_where_cuda_is(tmp_path: Path, capsys) -> None:
    trial = trained_dir(tmp_path, PPO_AND_RANDOM)
    assert main(["eval", f"{trial}", "--episodes", "5", "-q"]) == 0
    on_cpu = json.loads((trial / "eval.json").read_text())["sessions"][0]["pairs"]
    as_if_trained_on_a_gpu(trial)
    capsys.readouterr()
    assert main(["eval", f"{trial}", "--episodes", "5"]) == 0
    err = capsys.readouterr().err
    assert "agent[0].net.gpu: s trained on a GPU and this machine has no CUDA: it plays on the CPU" in err
    assert json.loads((trial / "eval.json").read_text())["sessions"][0]["pairs"] == on_cpu  # the same agent
    assert main(["enjoy", f"{trial}", "--episodes", "1", "-q"]) == 0
    (trial / "session_0" / "summary.json").unlink()
    capsys.readouterr()
    assert main(["resume", f"{trial}", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {trial / 'spec.json'}: agent[0].net.gpu: s trained on a "
                                                    "GPU and this machine has no CUDA: go on with it where CUDA is")


@pytest.mark.parametrize("codec", ["mp4", "gif"])
def test_enjoy_at_dir_writes_a_video_when_headless(tmp_path: Path, monkeypatch, capsys, codec: str) -> None:
    if codec == "mp4":
        pytest.importorskip("imageio_ffmpeg")
    else:
        monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # as if the render extra were absent
    raw = {"agent": [{"name": "rnd", "algorithm": {"name": "Random"}}],
           "env": [{"name": "tests.test_eval_enjoy:Corridor", "max_frame": 200, "max_t": 30},
                   {"name": "CartPole-v1", "max_frame": 200}],
           "body": {"num": 2}, "meta": {"random_seed": 1, "checkpoint_frequency": 100}}
    trial = trained_dir(tmp_path, raw)
    monkeypatch.delenv("DISPLAY", raising=False)
    capsys.readouterr()
    assert main(["enjoy", f"{trial}", "--episodes", "2", "-q"]) == 0
    out = capsys.readouterr().out
    videos = [Path(line.split(": ", 1)[1]) for line in out.splitlines() if line.startswith("video: ")]
    assert videos[0].parent == trial and videos[0].name == f"enjoy_e0.{codec}"
    for video in videos:
        assert frames_in(video) > 2
    if importlib.util.find_spec("pygame") is not None:
        assert [v.name for v in videos] == [f"enjoy_e0.{codec}", f"enjoy_e1.{codec}"]  # CartPole drew its frames
    else:
        assert "CartPole-v1: cannot render" in out  # said in one line why not


def frames_in(video: Path) -> int:
    """Number of frames in an mp4 (imageio) or GIF (Pillow) file."""
    if video.suffix == ".mp4":
        import imageio.v3 as iio

        return len(iio.imread(video))
    from PIL import Image

    with Image.open(video) as img:
        return img.n_frames


def test_enjoy_needs_a_trained_agent(tmp_path: Path, capsys) -> None:
    trial = trained_dir(tmp_path, {"agent": [{"name": "rnd", "algorithm": {"name": "Random"}}],
                                   "env": [{"name": "tests.test_eval_enjoy:Corridor", "max_frame": 50}]})
    for p in trial.glob("session_0/agent_a0.pt"):
        p.unlink()
    for p in trial.glob("session_0/checkpoint.json"):
        p.unlink()
    capsys.readouterr()
    assert main(["enjoy", f"{trial}", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no trained agent" in err and err.count("\n") == 1


@pytest.mark.parametrize("name", ["pettingzoo.classic.tictactoe_v3:env", "pettingzoo.classic.rps_v2:parallel_env",
                                  "tests.space_envs:LabTestSpaces-v0"])
def test_enjoy_reads_render_modes_from_the_env_a_factory_makes(name: str) -> None:
    """PettingZoo's `env` / `parallel_env` are functions with no metadata of their own: the render modes are the
    env's, so enjoy asks it for rgb frames (a registered id's come from its class)."""
    from slm_lab_like.experiment.enjoy import with_rgb

    raw = {"agent": [{"algorithm": {"name": "Random"}}], "env": [{"name": name, "max_frame": 10}],
           "body": {"num": 2 if "pettingzoo" in name else 1}}
    entry = validate(raw, "x").env[0]
    rgb, reason, fps = with_rgb(entry)
    expected = "pettingzoo" in name  # SpaceEnv renders nothing
    assert (reason is None) == expected and (rgb.kwargs.get("render_mode") == "rgb_array") == expected, reason
