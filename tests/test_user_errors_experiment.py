"""User errors of running a spec, one line each: Ray searches that could never start a trial, an env that raises
mid-run, enjoy's --episodes and envs that cannot render, check over every spec of a file, modules in the current
directory, and options that would do nothing; and resume trimming the train CSVs to the checkpoint."""
from __future__ import annotations

import copy
import csv
import json
import logging
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import gymnasium as gym
import numpy as np
import pytest

from slm_lab_like.cli import main
from slm_lab_like.experiment.checkpoint import read_checkpoint
from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.load import validate
from tests.conftest import random_spec

ROOT = Path(__file__).resolve().parent.parent
ME = "tests.test_user_errors_experiment"


class FailsLater(gym.Env):
    """Steps fine for the lab's probe, then raises on its third step."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        if self.t >= 3:
            raise RuntimeError("boom at step 3")
        return np.zeros(2, np.float32), 1.0, False, False, {}


class NoPictures(FailsLater):
    """An env without render modes: episodes of 4 steps, reward 1 each."""

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.zeros(2, np.float32), 1.0, self.t >= 4, False, {}


def write(path: Path, raw: dict) -> Path:
    path.write_text(json.dumps(raw))
    return path


def lab(*args: str, cwd: Path = ROOT, timeout: float = 120) -> subprocess.CompletedProcess:
    """run_lab.py with `args` in a fresh process (its own sys.path: no pytest's)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, str(ROOT / "run_lab.py"), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def ray_spec(ray: dict) -> dict:
    raw = random_spec()
    raw["meta"].update(search_backend="ray", ray=ray)
    raw["search"] = {"meta": {"random_seed__grid_search": [1, 2]}}
    return raw


# 1. Ray searches that could never start a trial: refused by check, and by the search before Ray starts


@pytest.mark.parametrize("ray, key, found", [
    ({"num_cpus": 1, "resources_per_session": {"cpu": 4}}, "meta.ray.resources_per_session.cpu",
     "a session asks for 4 CPUs and the private local Ray has 1 (meta.ray.num_cpus)"),
    ({"resources_per_session": {"cpu": 10_000}}, "meta.ray.resources_per_session.cpu",
     f"a session asks for 10000 CPUs and the private local Ray has {os.cpu_count()} (this machine's CPUs)"),
    ({"resources_per_session": {"gpu": 64}}, "meta.ray.resources_per_session.gpu", "a session asks for 64 GPU(s) and torch sees"),
])
def test_check_refuses_trial_resources_a_private_ray_cannot_give(tmp_path: Path, capsys, ray: dict, key: str,
                                                                 found: str) -> None:
    path = write(tmp_path / "r.json", ray_spec(ray))
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: {key}: {found}") and err.count("\n") == 1, err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def not_ray() -> Iterator[str]:
    """The address of a server that accepts connections and closes them: it answers, but not as Ray does."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    server.close()


def test_check_refuses_a_ray_address_that_does_not_answer_as_ray(tmp_path: Path, capsys, not_ray: str) -> None:
    dead = f"127.0.0.1:{free_port()}"
    for address, found in [(dead, f'no Ray cluster answers at "{dead}" (Connection refused)'),
                           (not_ray, f'"{not_ray}" answers, but not as a Ray cluster'),
                           ("nonsense", 'expected "auto", "HOST:PORT" or "ray://HOST:PORT", got "nonsense"')]:
        path = write(tmp_path / "r.json", ray_spec({"address": address}))
        assert main(["check", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {path}: meta.ray.address: {found}") and err.count("\n") == 1, err


def test_a_ray_search_that_could_not_start_is_refused_before_ray_starts(tmp_path: Path, capsys) -> None:
    pytest.importorskip("ray")
    path = write(tmp_path / "r.json", ray_spec({"num_cpus": 1, "resources_per_session": {"cpu": 2}}))
    out = tmp_path / "data"
    assert main(["search", str(path), "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: meta.ray.resources_per_session.cpu: a session asks for 2 CPUs")
    assert err.count("\n") == 1 and not out.exists()  # nothing written, no Ray started
    dead = f"127.0.0.1:{free_port()}"
    assert main(["search", str(path), "--ray-address", dead, "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert err == f'error: --ray-address: no Ray cluster answers at "{dead}" (Connection refused); start one ' \
                  "(ray start --head) or fix the address\n"


def test_a_trial_larger_than_the_whole_cluster_is_one_line() -> None:
    pytest.importorskip("ray")
    from slm_lab_like.experiment.ray_backend import check_fits
    from slm_lab_like.spec.errors import SpecError

    spec = validate(ray_spec({"address": "10.0.0.1:6379", "resources_per_session": {"cpu": 1, "gpu": 1}}), "r").meta.ray
    check_fits(spec, {"CPU": 8.0, "GPU": 1.0})
    with pytest.raises(SpecError, match=r'^meta\.ray\.resources_per_session\.gpu: a session asks for 1 GPU\(s\) and the '
                                        r"Ray cluster at 10\.0\.0\.1:6379 has 0 in all: it could never start$"):
        check_fits(spec, {"CPU": 8.0})


# 2. An env that raises mid-run: one line naming the session and the env; the traceback in the session's error.log


@pytest.mark.long  # 8-30 s of the default run (5 min on 2 cores)
def test_an_env_that_raises_mid_run_is_one_line_per_run(tmp_path: Path) -> None:
    raw = random_spec(num=2)
    raw["env"][0]["name"] = f"{ME}:FailsLater"
    raw["meta"]["max_session"] = 2
    done = lab(str(write(tmp_path / "f.json", raw)), "--out", str(tmp_path / "out"), "-q")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    (trial,) = (tmp_path / "out").iterdir()
    assert line == (f'error: session 0: env[0] "{ME}:FailsLater" step failed: RuntimeError: boom at step 3 '
                    f"(traceback in {trial / 'session_0' / 'error.log'}); session(s) 1 failed too (see their "
                    "error.log)")
    for i in (0, 1):
        trace = (trial / f"session_{i}" / "error.log").read_text()
        assert trace.startswith("Traceback") and 'raise RuntimeError("boom at step 3")' in trace
    assert json.loads((trial / "spec.json").read_text())["seeds"] == [7, 8]
    assert not list(trial.rglob("*.tmp")) and not (trial / "trial.json").exists()


def test_a_failing_session_in_process_names_its_env_and_keeps_other_errors_as_they_are() -> None:
    from slm_lab_like.experiment.failures import SessionFailed

    raw = random_spec()
    raw["env"][0]["name"] = f"{ME}:FailsLater"
    with pytest.raises(SessionFailed) as info:
        Session(validate(raw, "f"), 0, 1).run()
    assert str(info.value) == f'session 0: env[0] "{ME}:FailsLater" step failed: RuntimeError: boom at step 3'

    class Stop(Exception):
        pass

    def stop(frame: int, wall: float, metrics: dict) -> None:
        raise Stop

    raw = random_spec(max_frame=500)
    raw["meta"]["log_frequency"] = 100
    with pytest.raises(Stop):  # what a caller's on_progress raises comes back as it was
        Session(validate(raw, "s"), 0, 1, on_progress=stop).run()


# 3. Resume trims the train CSVs to the checkpoint, as it does the metrics CSVs


def test_resume_drops_train_rows_written_after_the_checkpoint(tmp_path: Path) -> None:
    raw = {"agent": [{"name": "ppo", "algorithm": {"name": "PPO", "n_epochs": 1, "minibatch_size": 32},
                      "memory": {"name": "OnPolicyBatch", "n_steps": 32}, "net": {"name": "MLP", "hid_layers": [8]}}],
           "env": [{"name": "CartPole-v1", "max_frame": 1200}], "body": {"num": 2},
           "meta": {"random_seed": 3, "log_frequency": 700, "checkpoint_frequency": 500}}
    spec = validate(raw, "t")

    class Stop(Exception):
        pass

    def stop(frame: int, wall: float, metrics: dict) -> None:
        raise Stop  # at frame 700, after the checkpoint at 500: the progress point wrote train rows past it

    with pytest.raises(Stop):
        Session(spec, 0, 3, tmp_path, on_progress=stop).run()
    ckpt = read_checkpoint(tmp_path)
    assert ckpt is not None and ckpt.session_frame == 500
    train = tmp_path / "train_a0.csv"
    before = frames_of(train)
    assert before and max(before) > 500 and os.path.getsize(train) > ckpt.train_bytes[0]
    Session(spec, 0, 3, tmp_path, resume=True).run()
    after = frames_of(train)
    assert all(b > a for a, b in zip(after, after[1:])), after  # no row from before the kill past the checkpoint
    assert [f for f in after if f <= 500] == [f for f in before if f <= 500] and after[-1] >= 1100


def frames_of(path: Path) -> list[int]:
    with open(path, newline="") as f:
        return [int(row["frame"]) for row in csv.DictReader(f)]


# 4, 5. enjoy: --episodes must be at least 1; envs that cannot render are played without pictures


@pytest.fixture
def no_pictures_trial(tmp_path: Path) -> Path:
    raw = random_spec()
    raw["env"][0]["name"] = f"{ME}:NoPictures"
    assert main([str(write(tmp_path / "n.json", raw)), "--out", str(tmp_path / "out"), "-q"]) == 0
    return next((tmp_path / "out").iterdir())


@pytest.mark.parametrize("episodes", ["0", "-2"])
def test_enjoy_refuses_episodes_below_one_and_leaves_videos_alone(no_pictures_trial: Path, capsys,
                                                                   episodes: str) -> None:
    video = no_pictures_trial / "enjoy_e0.mp4"
    video.write_bytes(b"an earlier video")
    capsys.readouterr()
    assert main(["enjoy", f"{no_pictures_trial}", "--episodes", episodes, "-q"]) == 2
    assert capsys.readouterr().err == f"error: --episodes must be at least 1, got {episodes}\n"
    assert video.read_bytes() == b"an earlier video"


def test_enjoy_plays_envs_that_cannot_render_without_pictures(no_pictures_trial: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["enjoy", f"{no_pictures_trial}", "--episodes", "2", "-q"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"env {ME}:NoPictures: ") and out[0].endswith("played without pictures")
    assert out[1:] == [f"n: agent r0 in {ME}:NoPictures: returns 4, 4"]
    assert not list(no_pictures_trial.glob("enjoy_e*"))


# 6. check reports every spec of a file


def test_check_reports_every_spec_of_a_file(tmp_path: Path, capsys) -> None:
    bad = random_spec()
    bad["env"][0]["max_frame"] = "lots"
    path = write(tmp_path / "many.json", {"good": random_spec(), "bad": bad, "also_good": random_spec()})
    assert main(["check", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"{path}: good: ok", f"{path}: also_good: ok"]
    assert captured.err == f'error: {path}: bad: env[0].max_frame: expected an integer or null, got "lots"\n'
    assert main(["check", str(path), "good"]) == 0


# 7. `module:Class` env names find modules in the current directory, in session workers too


@pytest.mark.slow
@pytest.mark.long  # 8-30 s of the default run (5 min on 2 cores)
def test_env_modules_in_the_current_directory_are_importable(tmp_path: Path) -> None:
    (tmp_path / "my_cwd_envs.py").write_text(
        "from tests.test_user_errors_experiment import NoPictures as Here  # noqa: F401\n")
    raw = random_spec(max_frame=40)
    raw["env"][0]["name"] = "my_cwd_envs:Here"
    raw["meta"]["max_session"] = 2
    write(tmp_path / "s.json", raw)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)  # the tests package, which my_cwd_envs imports; not the current directory
    # run_lab.py validates the spec, importing the module from its directory, then runs it in two session workers
    ran = subprocess.run([sys.executable, str(ROOT / "run_lab.py"), "s.json", "--out", "out", "-q"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert len(list((tmp_path / "out").glob("s_*/session_*/summary.json"))) == 2


# 8. Options that would do nothing are refused; a search without a search block says what it runs


@pytest.mark.parametrize("argv, message", [
    (["--mode", "test", "--episodes", "2"], "--episodes: used only with enjoy or eval; not with run"),
    (["enjoy", "somewhere", "--backend", "ray"], "--backend: used only with search; not with enjoy"),
    (["check", "x.json", "--ray-address", "auto"], "--ray-address: used only with run or search; not with check"),
    (["eval", "somewhere", "--out", "d"], "--out: used only with run, search or exploit; not with eval"),
    (["check", "x.json", "--port", "5"], "--port: used only with serve; not with check"),
    (["check", "x.json", "--mode", "test"], "--mode: used only with run; not with check"),
    (["check", "x.json", "--seed", "3"], "--seed: used only with run, search or exploit; not with check"),
    (["resume", "somewhere", "--set", "meta.random_seed=3"], "--set: used only with run, search, check or serve; not "
                                                            "with resume"),
    (["--mode", "search", "x.json"], "--mode search: a command now: run_lab.py search SPEC [NAME]"),
    (["--mode", "test", "--out", ""], "--out: an empty path; give the directory the results go under (default: data)"),
])
def test_options_that_would_do_nothing_are_refused(capsys, argv: list[str], message: str) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err == f"error: {message}\n"


def test_search_mode_without_a_search_block_says_it_runs_the_spec_as_written(tmp_path: Path, caplog,
                                                                            monkeypatch) -> None:
    from slm_lab_like.experiment import search

    class Ran(Exception):
        pass

    def run_local(*args: Any) -> list[dict]:
        raise Ran

    monkeypatch.setattr(search, "run_local", run_local)
    raw = copy.deepcopy(random_spec())
    with caplog.at_level(logging.WARNING, logger="slm_lab_like"), pytest.raises(Ran):
        search.run_experiment(raw, "plain", tmp_path)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "search plain: the spec has no search block; its 1 trial(s) run the spec as written"]


def test_a_run_on_a_ray_address_that_does_not_answer_is_one_line_and_writes_nothing(tmp_path: Path, capsys) -> None:
    pytest.importorskip("ray")
    path = write(tmp_path / "r.json", random_spec())
    out = tmp_path / "data"
    dead = f"127.0.0.1:{free_port()}"
    assert main(["run", str(path), "--ray-address", dead, "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert err == f'error: --ray-address: no Ray cluster answers at "{dead}" (Connection refused); start one ' \
                  "(ray start --head) or fix the address\n"
    assert not out.exists()
