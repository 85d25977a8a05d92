"""`net.gpu: true` on CUDA: every shipped spec and every space kind trains with its nets on the GPU, a GPU run
resumes there and plays on a machine without CUDA, and PPO learns CartPole on the GPU as it does on the CPU.

Skipped where torch sees no CUDA device (CI has none); on a GPU machine `python -m pytest tests/test_gpu.py -m ''`
runs them all, the learning check included.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from slm_lab_like.agents.base import Algorithm
from slm_lab_like.experiment.checkpoint import MANIFEST, read_checkpoint
from slm_lab_like.spec.load import read_file, validate
from slm_lab_like.spec.tournament import is_tournament
from tests.helpers import train
from tests.processes import kill_lab_at
from tests.test_learning import learn
from tests.test_resume import ppo_spec
from tests.test_spaces_session import LEARNERS, fits
from tests.space_envs import ACT_KINDS, OBS_KINDS

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

ROOT = Path(__file__).resolve().parent.parent
SPECS = [(path, name) for path in sorted((ROOT / "spec").rglob("*.json")) for name, raw in read_file(path).items()
         if not is_tournament(raw) and any("net" in agent for agent in raw["agent"])]


FRAMES = {"sac_pendulum": 2048}  # frames in which each agent trains a few times (SAC trains every frame)


def on_gpu(raw: dict[str, Any]) -> dict[str, Any]:
    """A copy of a raw spec whose every agent with a net asks for the GPU (a net block added where it has none)."""
    raw = copy.deepcopy(raw)
    for agent in raw["agent"]:
        if agent.get("algorithm", {}).get("name") not in ("Random", "Scripted"):
            agent.setdefault("net", {}).update(gpu=True)
    return raw


def learners(algo: Any) -> list[Algorithm]:
    """The algorithms holding nets in an agent: itself, or an opponent pool's learner."""
    inner = getattr(algo, "learner", None)
    return [inner] if inner is not None else [algo] if hasattr(algo, "device") else []


def assert_on_cuda(algo: Algorithm) -> None:
    """Every module and optimiser state of `algo` lives on the GPU."""
    modules = [m for m in vars(algo).values() if isinstance(m, torch.nn.Module)]
    assert modules and getattr(algo, "device").type == "cuda"
    for m in modules:
        assert all(p.is_cuda for p in m.parameters()), type(m).__name__
    for name in ("optim", "actor_optim", "critic_optim"):
        optim = getattr(algo, name, None)
        if optim is not None:
            states = [s for st in optim.opt.state.values() for s in st.values() if torch.is_tensor(s) and s.dim() > 0]
            assert all(s.is_cuda for s in states), name


@pytest.mark.parametrize("path,name", SPECS, ids=[f"{p.relative_to(ROOT)}:{n}" for p, n in SPECS])
def test_every_spec_trains_on_the_gpu(path: Path, name: str) -> None:
    raw = on_gpu(read_file(path)[name])
    spec = validate(raw, name)
    envs = [dataclasses.replace(e, max_frame=FRAMES.get(name, 8192), max_episode=None) for e in spec.env]
    spec = dataclasses.replace(spec, env=envs, meta=dataclasses.replace(spec.meta, max_session=1))
    space, result = train(spec, seed=1)
    assert all(frames > 0 for frames in result.env_frames)
    nets = [a for agent in space.agent_space.agents for a in learners(agent)]
    assert nets, "the spec has no agent with a net"
    for algo in nets:
        assert algo.opt_step > 0, f"{type(algo).__name__} never trained"
        assert_on_cuda(algo)


@pytest.mark.parametrize("algorithm", [a for a in LEARNERS if a != "Random"])
@pytest.mark.parametrize("obs", OBS_KINDS)
def test_every_space_kind_trains_on_the_gpu(obs: str, algorithm: str) -> None:
    for act in [a for a in ACT_KINDS if fits(algorithm, obs, a)]:
        extra = {"learning_starts": 16} if algorithm.endswith("DQN") or algorithm == "SAC" else {}
        memory = {"name": "OnPolicyBatch", "n_steps": 16} if algorithm in ("A2C", "PPO") else None
        conv = {"name": "ConvNet", "channels": [8, 16], "kernels": [4, 3], "strides": [2, 1]}  # for 16x16 images
        net = {**(conv if obs == "image" and algorithm != "SAC" else {"name": "MLP"}), "gpu": True}
        agent = {"algorithm": {"name": algorithm, **extra}, "net": net, **({"memory": memory} if memory else {})}
        raw = {"agent": [agent], "env": [{"name": "tests.space_envs:SpaceEnv", "kwargs": {"obs": obs, "act": act},
                                          "max_frame": 120}],
               "body": {"num": 2}, "meta": {"random_seed": 0}}
        space, result = train(raw)
        assert result.env_frames == [120]
        assert_on_cuda(space.agent_space.agents[0])


def lab(*args: str, cuda: bool = True) -> subprocess.CompletedProcess:
    """run_lab.py in a child process; without `cuda` it sees no GPU (CUDA_VISIBLE_DEVICES empty), as a laptop."""
    env = {**os.environ, **({} if cuda else {"CUDA_VISIBLE_DEVICES": ""})}
    return subprocess.run([sys.executable, str(ROOT / "run_lab.py"), *args, "-q"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_a_gpu_run_resumes_on_the_gpu_and_plays_without_one(tmp_path: Path) -> None:
    max_frame = 20000
    spec_file = tmp_path / "ppo_gpu.json"
    spec_file.write_text(json.dumps(on_gpu(ppo_spec(max_frame, 2000))))
    session_dir = kill_lab_at(spec_file, tmp_path / "out", f"*/session_0/{MANIFEST}").parent
    ckpt = read_checkpoint(session_dir)
    assert not ckpt.finished
    saved = torch.load(ckpt.path / "agent_a0.pt", weights_only=True)
    assert saved["policy"][next(iter(saved["policy"]))].is_cuda and saved["gen"].numel() == 16  # CUDA's Philox state

    resumed = lab("resume", f"{session_dir.parent}")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((session_dir / "summary.json").read_text())
    assert max_frame <= summary["envs"][0]["frames"]

    played = lab("eval", f"{session_dir.parent}", "--episodes", "4", cuda=False)
    assert played.returncode == 0, played.stderr
    assert "trained on a GPU and this machine has no CUDA: it plays on the CPU" in played.stderr
    assert json.loads((session_dir.parent / "eval.json").read_text())
    (session_dir / "summary.json").unlink()
    refused = lab("resume", f"{session_dir.parent}", cuda=False)
    assert refused.returncode == 2 and "agent[0].net.gpu: ppo_gpu trained on a GPU" in refused.stderr, refused.stderr


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ppo_learns_cartpole_on_the_gpu(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    def load_on_gpu(path: Path) -> Any:
        return validate(on_gpu(read_file(path)[path.stem]), path.stem)

    monkeypatch.setattr("tests.test_learning.load", load_on_gpu)
    assert learn("ppo_cartpole", 475.0, seed) is not None
