"""Watching a run while it learns: stats from every algorithm, TensorBoard event files and CSVs written as the
run goes, rows kept when it is killed, a progress bar on a terminal and plain lines in a pipe."""
from __future__ import annotations

import csv
import json
import math
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from slm_lab_like.analysis.metrics import read_csv
from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.load import validate
from tests.helpers import train
from tests.processes import kill_lab_at
from tests.tb import scalars

ROOT = Path(__file__).resolve().parent.parent
PPO_TAGS = ("train/policy_loss", "train/value_loss", "train/entropy", "train/approx_kl", "train/clip_fraction",
            "train/explained_variance", "train/lr", "train/grad_norm")
ROLLOUT_TAGS = ("rollout/return_mean_100", "rollout/episode_length", "time/fps")


def test_demo_writes_tensorboard_scalars_that_read_back(tmp_path: Path) -> None:
    raw = json.loads((ROOT / "spec" / "demo.json").read_text())["demo"]
    raw["env"][0]["max_frame"] = 3000
    raw["meta"].update(log_frequency=500, max_session=1)
    spec = validate(raw, "demo")
    Session(spec, seed=0, out_dir=tmp_path).run()
    tags = scalars(tmp_path)
    for tag in PPO_TAGS + ROLLOUT_TAGS:
        points = tags.get(tag)
        assert points and len(points) >= 2, f"{tag}: {points}"
        steps = [s for s, _ in points]
        assert steps == sorted(steps) and len(set(steps)) == len(steps), f"{tag}: steps {steps}"
        assert all(math.isfinite(v) for _, v in points), f"{tag}: {points}"
    with open(tmp_path / "train_a0.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and {"frame", "train/policy_loss", "train/updates"} <= set(rows[0])
    assert [int(r["frame"]) for r in rows] == sorted(int(r["frame"]) for r in rows)


@pytest.mark.parametrize("algorithm,memory,keys", [
    ({"name": "DQN", "learning_starts": 50}, {"name": "Replay", "batch_size": 16},
     ("train/q_mean", "train/td_error", "train/epsilon", "train/loss", "train/lr", "train/grad_norm")),
    ({"name": "A2C"}, {"name": "OnPolicyBatch", "n_steps": 8},
     ("train/policy_loss", "train/value_loss", "train/entropy", "train/explained_variance")),
    ({"name": "REINFORCE", "baseline": "mean"}, {"name": "OnPolicyBatch", "n_steps": 16},
     ("train/policy_loss", "train/entropy", "train/lr")),
])
def test_each_algorithm_reports_its_stats_through_one_channel(algorithm: dict, memory: dict, keys: tuple) -> None:
    raw = {"agent": [{"algorithm": algorithm, "memory": memory}], "env": [{"name": "CartPole-v1", "max_frame": 600}],
           "body": {"num": 2}, "meta": {"random_seed": 0}}
    _, result = train(raw)
    (history,) = result.train
    assert history, "no stats reported"
    for key in keys:
        assert all(math.isfinite(row[key]) for _, row in history if key in row) and any(key in r for _, r in history)


def test_tensorboard_false_writes_csvs_only(tmp_path: Path) -> None:
    raw = {"agent": [{"algorithm": {"name": "PPO"}, "memory": {"name": "OnPolicyBatch", "n_steps": 16}}],
           "env": [{"name": "CartPole-v1", "max_frame": 400}], "body": {"num": 2},
           "meta": {"random_seed": 0, "tensorboard": False}}
    session_dir = tmp_path / "session_0"  # not there yet: TensorBoard's writer made it before, nothing else did
    Session(validate(raw, "t"), seed=0, out_dir=session_dir).run()
    assert not list(session_dir.glob("events.out.tfevents.*"))
    assert (session_dir / "train_a0.csv").exists() and (session_dir / "metrics_a0_e0_b0.csv").exists()


def spec_file(tmp_path: Path, max_frame: int, **meta: Any) -> Path:
    raw = {"agent": [{"name": "random", "algorithm": {"name": "Random"}}],
           "env": [{"name": "CartPole-v1", "max_frame": max_frame}], "body": {"num": 1},
           "meta": {"random_seed": 3, "log_frequency": 5000, **meta}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(raw))
    return path


def test_a_killed_run_without_checkpoints_keeps_its_metric_rows(tmp_path: Path) -> None:
    path = spec_file(tmp_path, 10**9)
    metrics = kill_lab_at(path, tmp_path / "out", "*/session_0/metrics_a0_e0_b0.csv", settle=2.0, timeout=60)
    session = metrics.parent
    assert not (session / "checkpoint.json").exists() and not (session / "summary.json").exists()
    rows = read_csv(metrics)
    assert len(rows) > 100  # about 2.5 s of CartPole episodes, flushed every half second
    assert [r["episode"] for r in rows] == list(range(1, len(rows) + 1))
    assert all(a["frame"] + b["t"] == b["frame"] for a, b in zip(rows, rows[1:]))  # no row lost between others


def run_in_pty(cmd: list[str], timeout: float = 120) -> str:
    """Run a command with its output on a pseudo-terminal; everything it wrote."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=10)
    os.close(master)
    return out.decode(errors="replace")


@pytest.mark.long  # 8-30 s of the default run (5 min on 2 cores)
def test_progress_bar_on_a_terminal_reaches_the_budget_with_an_eta(tmp_path: Path) -> None:
    out = run_in_pty([sys.executable, "run_lab.py", str(spec_file(tmp_path, 60_000)), "--out", str(tmp_path / "o")])
    assert re.search(r"run s0: +\d+%\|", out), out[-2000:]
    assert re.search(r"\[\d\d:\d\d<\d\d:\d\d", out), out[-2000:]  # elapsed<remaining: the ETA
    assert "60.0k/60.0k" in out and "100%" in out, out[-2000:]
    assert "| frame " not in out  # the bar replaces the plain lines


@pytest.mark.long  # 8-30 s of the default run (5 min on 2 cores)
def test_plain_progress_lines_in_a_pipe(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "run_lab.py", str(spec_file(tmp_path, 12_000)), "--out",
                           str(tmp_path / "o")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if "| frame " in ln]
    assert len(lines) >= 2 and "\r" not in done.stderr and "%|" not in done.stderr
