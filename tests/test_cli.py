"""The command line: help, check, runs, and one-line errors for bad specs."""
from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from slm_lab_like.cli import main
from slm_lab_like.logs import configure_logging
from tests.conftest import random_spec

ROOT = Path(__file__).resolve().parent.parent


def test_help_explains_usage(capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--help"])
    out = capsys.readouterr().out
    assert stopped.value.code == 0
    for word in ("run", "search", "resume", "enjoy", "eval", "check", "serve", "spec/demo.json",
                 "data/<spec_name>_<timestamp>", "module:Class"):
        assert word in out


@pytest.mark.parametrize("command, words", [("run", ("--mode", "--set", "--seed", "--out")),
                                            ("eval", ("DIR", "--episodes")), ("enjoy", ("DIR", "--episodes")),
                                            ("serve", ("--host", "--client-timeout", "CURVE", "--set"))])
def test_each_command_tells_its_own_options(capsys, command: str, words: tuple[str, ...]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert stopped.value.code == 0 and out.startswith(f"usage: run_lab.py {command} ")
    assert all(w in out for w in words), out


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


def test_check_a_spec_given_by_process_substitution(tmp_path: Path) -> None:
    """`run_lab.py check <(...)`: the shell hands a pipe (/dev/fd/N), which the lab reads once."""
    path = tmp_path / "piped.json"
    path.write_text(json.dumps(random_spec()))
    out = subprocess.run(["bash", "-c", f'"{sys.executable}" run_lab.py check <(cat "{path}")'], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.rstrip().endswith(": ok"), out.stderr


@pytest.mark.long  # 8-30 s of the default run (5 min on 2 cores)
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


@pytest.mark.parametrize("extra, words", [
    (["--port", "99999"], "error: --port: expected 0 (free ports) or a port from 1 to 65535"),
    (["--port", "-5"], "error: --port: expected 0 (free ports) or a port from 1 to 65535"),
    (["--host", "not-a-host"], 'error: serve: env[0] "CartPole-v1": cannot listen at tcp://not-a-host:0: '),
    (["--port", "IN_USE"], 'error: serve: env[0] "CartPole-v1": cannot listen at tcp://127.0.0.1:'),
])
def test_serve_where_it_cannot_listen_is_one_line(tmp_path: Path, capsys, extra: list[str], words: str) -> None:
    from slm_lab_like.remote import serve, shutdown

    path = tmp_path / "s.json"
    path.write_text(json.dumps(random_spec()))
    busy = serve("CartPole-v1")
    try:
        extra = [busy.rsplit(":", 1)[1] if e == "IN_USE" else e for e in extra]
        assert main(["serve", str(path), *extra]) == 2
    finally:
        shutdown(busy)
    err = capsys.readouterr().err.strip()
    assert err.startswith(words) and "\n" not in err, err


@pytest.mark.parametrize("bind, words", [
    ("127.0.0.1:5555", "expected tcp://HOST:PORT (or ipc://PATH)"),
    ("tcp://127.0.0.1:99999", "a port from 0 to 65535"),
    ("tcp://10.1.2.3:0", "--allow-remote"),
])
def test_a_judge_refuses_an_address_it_cannot_listen_at_as_written(bind: str, words: str) -> None:
    from slm_lab_like.remote import JudgeServer

    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        JudgeServer("CartPole-v1", bind)


@pytest.mark.parametrize("command", [["--mode", "test"], ["search"]])
def test_an_out_dir_that_cannot_be_made_is_one_line(tmp_path: Path, capsys, command: list[str]) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({**random_spec(), "search": {"meta": {"random_seed__grid_search": [1, 2]}}}))
    assert main([*command, str(spec), "--out", str(blocker / "runs"), "-q"]) == 2
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


@pytest.mark.parametrize("kind", ["resume", "eval", "enjoy"])
def test_a_search_directory_given_for_a_trial_is_one_line(tmp_path: Path, capsys, kind: str) -> None:
    (tmp_path / "spec.json").write_text(json.dumps({"mode": "search", "trials": 2, "variables": []}))
    for k in range(2):
        (tmp_path / f"trial_{k}").mkdir()
    assert main([kind, str(tmp_path), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {tmp_path}: a search's directory, not a trial's; its trials are trial_0, trial_1: point at " \
                  "one of them"


def test_each_configure_logging_writes_to_the_stderr_of_its_call(monkeypatch: pytest.MonkeyPatch) -> None:
    log = logging.getLogger("slm_lab_like")
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    configure_logging()
    log.warning("one")
    first.close()  # as pytest's capture of an earlier test is, by the time a later one runs main()
    monkeypatch.setattr(sys, "stderr", second)
    configure_logging()
    log.warning("two")
    assert second.getvalue().endswith("WARNING two\n") and len(log.handlers) == 1


def test_set_and_seed_reach_the_run_and_its_record(tmp_path: Path) -> None:
    """--set KEY=VALUE sets a spec key before validation (JSON values, text otherwise; a missing object on the way
    is made), --seed sets meta.random_seed; the run's spec.json records what ran."""
    path = tmp_path / "s.json"
    path.write_text(json.dumps({k: v for k, v in random_spec().items() if k != "meta"}))
    assert main([str(path), "--out", str(tmp_path / "out"), "-q", "--set", "env[0].max_frame=120",
                 "--set", "agent[0].name=renamed", "--seed", "11"]) == 0
    record = json.loads(next((tmp_path / "out").glob("s_*/spec.json")).read_text())
    assert record["spec"]["env"][0]["max_frame"] == 120 and record["spec"]["agent"][0]["name"] == "renamed"
    assert record["spec"]["meta"]["random_seed"] == 11 and record["seeds"] == [11]



def test_a_run_that_ends_before_any_episode_says_so_instead_of_nan(tmp_path: Path, capsys) -> None:
    """CartPole's episodes last 8 frames at least: a 5-frame budget ends none, and the summary says what to change."""
    path = tmp_path / "short.json"
    path.write_text(json.dumps(random_spec(max_frame=5)))
    assert main([str(path), "--out", str(tmp_path / "out"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "agent r0 in CartPole-v1: no episode ended in 1 session(s); raise the env's max_frame" in out
    assert "nan" not in out

@pytest.mark.parametrize("override, message", [
    ("agent[0].algorithm.gama=0.9", 'agent[0].algorithm.gama: unknown key; it takes no keys here'),
    ("env[0].max_frame=lots", 'env[0].max_frame: expected an integer or null, got "lots"'),
    ("agent[2].name=x", "--set: agent[2].name=x: agent has 1 item(s); no agent[2]"),
    ("env.name=x", "--set: env.name=x: env is a list; expected an index, got 'name'"),
    ("max_frame", "--set: expected KEY=VALUE (a spec key path such as agent[0].algorithm.gamma=0.98), got "
                  "'max_frame'"),
])
def test_a_bad_override_is_one_line_at_its_key(tmp_path: Path, capsys, override: str, message: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(random_spec()))
    for command in (["check"], []):
        assert main([*command, str(path), "--set", override, "-q"]) == 2
        where = "" if message.startswith("--set") else f"{path}: "  # a command-line problem, not the file's
        assert capsys.readouterr().err == f"error: {where}{message}\n"


def test_the_command_is_found_after_options_and_run_is_the_default(tmp_path: Path, capsys) -> None:
    from slm_lab_like.cli import parser, with_command

    p = parser()
    assert with_command(p, ["-q", "check", "x.json"]) == ["check", "-q", "x.json"]
    assert with_command(p, ["--out", "check", "x.json"]) == ["run", "--out", "check", "x.json"]  # a value, not one
    assert with_command(p, ["x.json", "--mode", "test"]) == ["run", "x.json", "--mode", "test"]
    assert with_command(p, []) == ["run"]
    assert main(["-q", "check", str(ROOT / "spec/demo.json"), "demo"]) == 0
    assert capsys.readouterr().out.endswith("demo: ok\n")


def test_typos_of_a_command_an_option_and_a_spec_name_get_the_nearest_name(tmp_path: Path, capsys,
                                                                              monkeypatch) -> None:
    """A newcomer's typos are one line with a did-you-mean: a command (which would otherwise be taken for a spec), an
    option, a spec file beside the one named, and a shipped spec; a name close to nothing lists the shipped specs."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_spec.json").write_text(json.dumps(random_spec()))
    cases = [(["chek", "my_spec.json"], 'chek: no such command, spec file or shipped spec; did you mean the command '
                                        '"check"?'),
             (["evall", "data"], 'did you mean the command "eval"?'),
             (["my_spec.json", "--mdoe", "test"], "--mdoe: no such option of run; did you mean --mode?"),
             (["check", "my_spce.json"], 'my_spce.json: spec file not found; did you mean "my_spec.json"?'),
             (["check", "dmeo"], 'dmeo: spec file not found; did you mean the shipped spec "demo"?')]
    for args, message in cases:
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and message in err, (args, err)
    (tmp_path / "server.json").write_text(json.dumps(random_spec()))
    assert main(["server", "--mode", "test"]) == 2  # close to the command serve, closer to the spec beside it
    assert 'server: spec file not found; did you mean "server.json"?' in capsys.readouterr().err
    assert main(["check", "zzzz.json"]) == 2
    assert "(nor a shipped spec; shipped: benchmark/a2c_cartpole," in capsys.readouterr().err
    assert main(["check", "my_spec.json"]) == 0  # a spec named as it is still runs its course
