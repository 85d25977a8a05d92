"""The command line: help, check, runs, and one-line errors for bad specs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slm_lab_like.cli import main
from tests.conftest import random_spec

ROOT = Path(__file__).resolve().parent.parent


def test_help_explains_usage() -> None:
    out = subprocess.run([sys.executable, "run_lab.py", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0
    for word in ("check SPEC_FILE", "--mode", "spec/demo.json", "data/<spec_name>_<timestamp>"):
        assert word in out.stdout


def test_check_good_and_bad(tmp_path: Path, capsys) -> None:
    assert main(["check", str(ROOT / "spec/demo.json")]) == 0
    assert "demo: ok" in capsys.readouterr().out
    bad = random_spec()
    bad["env"][0]["max_frame"] = "lots"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f'error: {path}: env[0].max_frame: expected an integer or null, got "lots"\n'


def test_run_demo_in_test_mode_writes_results(tmp_path: Path) -> None:
    """No spec argument runs the spec "demo" of spec/demo.json."""
    out = subprocess.run([sys.executable, "run_lab.py", "--mode", "test", "--out", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    (trial,) = list(tmp_path.iterdir())
    assert trial.name.startswith("demo_")
    assert (trial / "session_0" / "metrics_a0_e0_b0.csv").exists()
    assert "results:" in out.stdout and "frame" in out.stderr


def test_unknown_spec_name_is_one_line(capsys) -> None:
    assert main([str(ROOT / "spec/demo.json"), "nope", "--mode", "test"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'no spec named "nope"; the file holds: demo' in err


def test_serve_refuses_a_batched_lab_env_in_one_line(capsys: "pytest.CaptureFixture[str]") -> None:
    path = str(ROOT / "spec" / "selfplay_connect_four.json")
    assert main(["serve", path]) == 2
    assert capsys.readouterr().err.strip() == (
        f'error: {path}: env[0].name: "connect_four_batch" is a lab-native batch env and '
        "cannot be served; serve its single-game form (e.g. connect_four) instead")


@pytest.mark.parametrize("mode", ["test", "search"])
def test_an_out_dir_that_cannot_be_made_is_one_line(tmp_path: Path, capsys, mode: str) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({**random_spec(), "search": {"meta": {"random_seed__grid_search": [1, 2]}}}))
    assert main([str(spec), "--mode", mode, "--out", str(blocker / "runs"), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: --out {blocker / 'runs'}: cannot make the results directory ") and "\n" not in err


def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path: Path, monkeypatch) -> None:
    """mkdir claims a results directory: a run whose directory another run made after it looked (here: every look
    says "free") takes the next one instead of failing."""
    from slm_lab_like.experiment import outdir

    monkeypatch.setattr(outdir.time, "strftime", lambda fmt: "STAMP")
    (tmp_path / "same_STAMP").mkdir()
    monkeypatch.setattr(Path, "exists", lambda self: False)  # a concurrent run made it after any look
    assert outdir.new_out_dir(tmp_path, "same") == tmp_path / "same_STAMP_1"
    assert outdir.new_out_dir(tmp_path, "same") == tmp_path / "same_STAMP_2"


@pytest.mark.parametrize("kind", ["train", "eval", "enjoy"])
def test_a_search_directory_given_for_a_trial_is_one_line(tmp_path: Path, capsys, kind: str) -> None:
    (tmp_path / "spec.json").write_text(json.dumps({"mode": "search", "trials": 2, "variables": []}))
    for k in range(2):
        (tmp_path / f"trial_{k}").mkdir()
    assert main(["--mode", f"{kind}@{tmp_path}", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {tmp_path}: a search's directory, not a trial's; its trials are trial_0, trial_1: point at " \
                  "one of them"
