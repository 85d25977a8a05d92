"""One set of names and options: the judge module, spawn_judge, serve(...) and run_lab.py serve take the same env
names and judge options; a judge that cannot start says why in one line; a CURVE-encrypted game is served and
played from the command line alone."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import zmq.auth

from slm_lab_like.remote import JudgeTimeout, RemoteEnv, judge_for, serve, shutdown, spawn_judge, stop_judge
from slm_lab_like.remote.options import OPTIONS
from slm_lab_like.remote.spawn import child_environment
from tests.test_remote_serve_games import PLAYER, Process

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parent.parent
JUDGE = [sys.executable, "-m", "slm_lab_like.remote.judge"]


def run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=30,
                          env=child_environment(str(ROOT)), **kwargs)


def test_both_command_lines_list_the_same_judge_options_curve_included():
    flags = {o.flag for o in OPTIONS}
    assert {"--secret-env", "--curve-secret-key", "--allow-claim", "--handshake-timeout", "--max-pending",
            "--client-timeout", "--on-timeout", "--session-timeout", "--max-sessions"} <= flags
    for command in (JUDGE + ["--help"], [sys.executable, "run_lab.py", "serve", "--help"]):
        text = run(command).stdout
        shown = set(re.findall(r"(--[a-z][a-z-]+)", text))
        assert flags <= shown, (command, flags - shown)
        assert "CURVE" in text


@pytest.mark.parametrize("name,kind,bodies", [
    ("tag_arena", "multi", 4),
    ("connect_four", "multi", 2),
    ("pettingzoo.classic.tictactoe_v3:env", "multi", 2),
    ("CartPole-v1", "single", None),
])
def test_spawn_judge_takes_every_name_a_spec_takes(name, kind, bodies):
    proc, address = spawn_judge(name, multi=kind == "multi")
    try:
        info = proc.judge_info
        assert (info["kind"], info["env"], info["address"]) == (kind, name, address)
        assert (len(info["tokens"]) if info["tokens"] else None) == bodies
    finally:
        stop_judge(proc)


def test_serve_takes_names_and_the_options_that_fit_the_judge():
    """serve("tag_arena") hosts a multi-agent judge; one set of options serves single- and multi-agent judges."""
    options = {"client_timeout": 2.0, "allow_claim": True, "handshake_timeout": 3.0, "max_pending": 4}
    multi, single = serve("tag_arena", **options), serve("CartPole-v1", **options)
    try:
        assert judge_for(multi).kind == "multi" and judge_for(multi).client_timeout == 2.0
        assert judge_for(multi).allow_claim and judge_for(single).max_pending == 4
        assert RemoteEnv(multi, timeout=5).body == "chaser_0"
        with pytest.raises(TypeError, match="client_timout"):
            serve("CartPole-v1", client_timout=1.0)
    finally:
        shutdown(multi)
        shutdown(single)


@pytest.mark.parametrize("args,reason", [
    (["--env", "CartPol-v1"], 'unknown env "CartPol-v1"; did you mean "CartPole-v1"?'),
    (["--env", "connect_four_batch"], "is a lab-native batch env and cannot be served"),
    (["--env", "CartPole-v1", "--multi"], '--multi: "CartPole-v1" is a single-agent env'),
    (["--env", "CartPole-v1", "--kwargs", '{"nope": 1}'], "unexpected keyword argument 'nope'"),
    (["--env", "tests.space_envs:BrokenEnv", "--kwargs", '{"fault": "old_api"}'],
     'env "tests.space_envs:BrokenEnv": step() returned a 4-tuple'),
    (["--env", "CartPole-v1", "--secret-env", "SLM_TEST_UNSET_VARIABLE"], "SLM_TEST_UNSET_VARIABLE is not set"),
    (["--env", "CartPole-v1", "--curve-secret-key", "/nonexistent/judge.key_secret"], "cannot read"),
])
def test_a_judge_that_cannot_start_says_why_in_one_line(args, reason):
    out = run(JUDGE + args)
    assert out.returncode == 2 and out.stdout == ""
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and reason in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_spawn_judge_reports_the_reason_and_run_lab_serve_a_bad_key(tmp_path):
    with pytest.raises(RuntimeError, match='did not start: error: .*unknown env "CartPol-v1"'):
        spawn_judge("CartPol-v1")
    spec = {"agent": [{"name": "random", "algorithm": {"name": "Random"}}],
            "env": [{"name": "CartPole-v1", "max_frame": 100}], "body": {"product": "outer", "num": 1}}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    out = run([sys.executable, "run_lab.py", "serve", str(path), "--curve-secret-key", str(tmp_path / "none")])
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0 and "cannot read" in out.stderr


def test_a_curve_served_game_plays_from_the_command_line_alone(tmp_path, procs):
    """Keys made with zmq's own helper; `run_lab.py serve SPEC --curve-secret-key FILE` hosts connect_four and
    prints its public key; two player processes given that key play whole games; a client without it gets no
    answer."""
    public_file, secret_file = zmq.auth.create_certificates(str(tmp_path), "judge")
    spec = {"agent": [{"name": "random", "algorithm": {"name": "Random"}}],
            "env": [{"name": "connect_four", "max_frame": 1000}], "body": {"product": "outer", "num": 2}}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    judge = Process([sys.executable, "run_lab.py", "serve", str(path), "-q", "--curve-secret-key", secret_file],
                    child_environment(str(ROOT)))
    procs.append(judge)
    hosted = judge.line(30)
    public = zmq.auth.load_certificate(public_file)[0]
    assert hosted["curve_public_key"] == public.decode()
    env = {**child_environment(str(ROOT)), "SLM_TEST_CURVE_KEY": hosted["curve_public_key"]}
    script = PLAYER.replace("RemoteEnv(address, token=token, timeout=20)",
                            "RemoteEnv(address, token=token, timeout=20, "
                            "curve_server_key=__import__('os').environ['SLM_TEST_CURVE_KEY'].encode())")
    assert script != PLAYER
    players = [Process([sys.executable, "-c", script, hosted["address"], token, "2", str(seed), "-1"], env)
               for seed, token in enumerate(hosted["tokens"].values())]
    procs += players
    games = [[p.line(30) for _ in range(2)] for p in players]
    assert [p.proc.wait(20) for p in players] == [0, 0]
    assert all(g["terminated"] for gs in games for g in gs)
    with pytest.raises(JudgeTimeout):
        RemoteEnv(hosted["address"], token=hosted["tokens"]["player_0"], timeout=1, retries=0, heartbeat=0.5)
