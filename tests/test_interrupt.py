"""Ctrl-C (SIGINT) or SIGTERM stops a run in order: every running session writes a checkpoint where it is and
stops, the lab says so in one line and exits with 130, and `run_lab.py resume DIR` goes on from those checkpoints. A
signal to the lab's process alone reaches its session workers through the pool's stop event; a terminal's Ctrl-C
reaches every process of the run."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slm_lab_like.experiment.checkpoint import read_checkpoint
from slm_lab_like.experiment.session import TICK_FRAMES

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(180)


def random_spec(sessions: int) -> dict:
    return {"agent": [{"name": "r", "algorithm": {"name": "Random"}}],
            "env": [{"name": "CartPole-v1", "max_frame": 10**9}], "body": {"num": 2},
            "meta": {"max_session": sessions, "random_seed": 1, "log_frequency": 4000}}


def run_until_stepping(args: list[str], sessions: int, group: bool = False) -> subprocess.Popen:
    """Start run_lab.py with `args` and return once each session has logged a progress line."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "run_lab.py"), *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=group)
    seen: set[str] = set()
    assert proc.stderr is not None
    while len(seen) < sessions:
        line = proc.stderr.readline()
        assert line, f"the run ended before stepping (rc {proc.wait()})"
        found = re.search(r" s(\d+) \| frame ", line)
        if found:
            seen.add(found.group(1))
    return proc


def stop(proc: subprocess.Popen, sig: int, group: bool) -> str:
    """Send `sig` (to the whole process group, as a terminal does, or to the lab's process alone); its last line."""
    os.killpg(proc.pid, sig) if group else os.kill(proc.pid, sig)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()  # its session workers follow it (they exit with the lab); none is left to slow later tests
        raise
    assert proc.returncode == 130, err
    return err.strip().splitlines()[-1]


def stopped_frames(line: str) -> dict[int, int]:
    return {int(i): int(f) for i, f in re.findall(r"session (\d+) stopped at frame (\d+) with a checkpoint", line)}


@pytest.mark.slow
@pytest.mark.long  # 29 s in the default run's load; a run's Ctrl-C is held there by the one-session test below
def test_ctrl_c_checkpoints_every_session_and_train_at_dir_goes_on(tmp_path: Path) -> None:
    spec = tmp_path / "long.json"
    spec.write_text(json.dumps(random_spec(2)))
    proc = run_until_stepping([str(spec), "--out", str(tmp_path / "out")], 2)
    line = stop(proc, signal.SIGINT, group=False)  # the lab's process alone: its workers hear it from the lab
    assert line.startswith("interrupted: ") and "go on with: run_lab.py resume " in line, line
    first = stopped_frames(line)
    assert set(first) == {0, 1}
    trial = Path(line.rpartition("resume ")[2])
    for i, frame in first.items():
        ckpt = read_checkpoint(trial / f"session_{i}")
        assert ckpt is not None and not ckpt.finished and ckpt.session_frame == frame > 0
        assert not (trial / f"session_{i}" / "summary.json").exists()

    proc = run_until_stepping(["resume", f"{trial}"], 2, group=True)
    line = stop(proc, signal.SIGTERM, group=True)  # every process of the run, as a scheduler's SIGTERM does
    again = stopped_frames(line)
    assert set(again) == {0, 1} and all(again[i] > first[i] for i in again), (first, again)
    assert all(read_checkpoint(trial / f"session_{i}").session_frame == again[i] for i in again)


def descendants(pid: int) -> set[int]:
    """The processes below `pid` (children, theirs, ...), read from /proc."""
    parent_of = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # ended while listed
            continue
        parent_of[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parent_of.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.long  # 12 s of process start-ups in the default run's load
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
def test_a_sigkilled_lab_takes_its_session_workers_with_it(tmp_path: Path) -> None:
    """SIGKILL leaves no session running on, orphaned, beside a later resume of its directory."""
    spec = tmp_path / "long.json"
    spec.write_text(json.dumps(random_spec(2)))
    proc = run_until_stepping([str(spec), "--out", str(tmp_path / "out")], 2)
    below = descendants(proc.pid)
    assert len(below) >= 3  # the fork server and two session workers, at least
    proc.kill()
    proc.communicate()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(alive(p) for p in below):
        time.sleep(0.05)
    assert not [p for p in below if alive(p)]


def test_one_session_in_the_labs_own_process_stops_the_same_way(tmp_path: Path) -> None:
    spec = tmp_path / "one.json"
    spec.write_text(json.dumps(random_spec(1)))
    proc = run_until_stepping([str(spec), "--out", str(tmp_path / "out")], 1)
    line = stop(proc, signal.SIGINT, group=False)
    assert set(stopped_frames(line)) == {0} and "go on with" in line, line


@pytest.mark.slow
@pytest.mark.long  # 16 s; a run's Ctrl-C is held in the default run by the test above
def test_a_search_stops_the_same_way_and_says_how_far_it_got(tmp_path: Path) -> None:
    raw = {**random_spec(1), "search": {"meta": {"random_seed__grid_search": [1, 2, 3, 4]}}}
    spec = tmp_path / "search.json"
    spec.write_text(json.dumps(raw))
    # started as a shell's background job is (SIGINT ignored): `kill -INT` still stops it in order
    proc = subprocess.Popen([sys.executable, str(ROOT / "run_lab.py"), "search", str(spec), "--out",
                             str(tmp_path / "out")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert proc.stderr is not None
    while "running" not in (line := proc.stderr.readline()):
        assert line, f"the search ended before running (rc {proc.wait()})"
    line = stop(proc, signal.SIGINT, group=False)
    assert line.startswith("interrupted: search stopped with 0 of 4 trial(s) finished"), line


def test_a_slow_env_stops_at_its_next_step_not_its_next_tick(tmp_path: Path) -> None:
    """A session whose env steps slowly (10 ms a step) hears a signal to its process at the next step: it stops far
    below the 2048 frames of a look at the clock, which would take it 20 s to reach."""
    raw = random_spec(1)
    raw["env"][0] = {"name": "tests.user_parts:Sleepy", "max_frame": 10**9, "max_t": 50}
    raw["body"]["num"] = 1
    raw["meta"]["log_frequency"] = 20
    spec = tmp_path / "slow.json"
    spec.write_text(json.dumps(raw))
    proc = run_until_stepping([str(spec), "--out", str(tmp_path / "out")], 1)
    frames = stopped_frames(stop(proc, signal.SIGTERM, group=False))
    assert set(frames) == {0} and 0 < frames[0] < TICK_FRAMES, frames
