"""Remote envs inside the lab: spec entries with `remote`, and `run_lab.py serve`."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from slm_lab_like.experiment.session import Session
from slm_lab_like.remote import RemoteEnv, judge_for, serve, shutdown
from slm_lab_like.remote.spawn import child_environment
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.load import validate
from tests.conftest import random_spec
from tests.helpers import first_legal_opponent

ROOT = Path(__file__).resolve().parent.parent


def rows(result) -> dict:
    return {c: [(r["frame"], r["t"], r["return"]) for r in m.rows] for c, m in result.metrics.items()}


def test_spawned_judge_session_equals_local_session() -> None:
    local = random_spec(num=2, max_frame=600)
    local["env"][0]["vector"] = "sync"  # copies, as the judge hosts them (not gymnasium's native vector env)
    remote = random_spec(num=2, max_frame=600)
    remote["env"][0]["remote"] = "spawn"
    a = Session(validate(local, "t"), seed=4).run()
    b = Session(validate(remote, "t"), seed=4).run()
    assert rows(a) == rows(b) and sum(len(r) for r in rows(a).values()) > 10


def test_remote_address_and_max_t() -> None:
    import gymnasium as gym

    address = serve(lambda: gym.make("CartPole-v1"))
    try:
        raw = random_spec(num=2, max_frame=200)
        raw["env"][0].update(remote=address, max_t=5, name="CartPole-v1")
        result = Session(validate(raw, "t"), seed=1).run()
        assert result.env_frames == [200]
        assert all(r["t"] <= 5 for m in result.metrics.values() for r in m.rows)
    finally:
        shutdown(address)


@pytest.mark.parametrize("change,message", [
    ({"remote": "http://x:1"}, r'^env\[0\]\.remote: expected "spawn", "ray" or a judge address like "tcp://127.0.0.1:5555", got "http://x:1"$'),
    ({"remote": "spawn", "vector": "async"}, r'^env\[0\]\.vector: a remote env is stepped through its judge; expected "auto" or "sync", got "async"$'),
    ({"remote": "spawn", "name": "CartPol-v1"}, r'^env\[0\]\.name: unknown env "CartPol-v1"'),
    ({"remote": 5}, r"^env\[0\]\.remote: expected a string or an object or null, got 5$"),
    ({"remote": "spawn", "name": "pettingzoo.classic.tictactoe_v3:env"},
     r'^env\[0\]\.remote: "pettingzoo.classic.tictactoe_v3:env" is a multi-agent env, and a judge the lab starts '
     r"hosts a single-agent one: drop `remote` .* its seat's token \(remote: \{address, token_env\}\)$"),
    ({"remote": "spawn", "name": "connect_four"}, r'^env\[0\]\.remote: "connect_four" is a multi-agent env'),
])
def test_remote_spec_errors(change: dict, message: str) -> None:
    raw = random_spec()
    raw["env"][0].update(change)
    with pytest.raises(SpecError, match=message):
        validate(raw, "t")


def test_serve_command_hosts_spec_envs(tmp_path: Path) -> None:
    spec = random_spec()
    spec["env"].append({"name": "Pendulum-v1", "max_frame": 10})
    path = tmp_path / "two.json"
    path.write_text(json.dumps(spec))
    proc = subprocess.Popen([sys.executable, "run_lab.py", "serve", str(path)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = [json.loads(proc.stdout.readline()) for _ in range(2)]
        assert [line["env"] for line in lines] == ["CartPole-v1", "Pendulum-v1"]
        assert all(line["address"].startswith("tcp://127.0.0.1:") for line in lines)
        env = RemoteEnv(lines[1]["address"], timeout=10)
        obs, _ = env.reset(seed=3)
        assert obs.shape == (3,) and obs.dtype == np.float32
        env.step(np.zeros(1, dtype=np.float32))
        env.close()
        proc.terminate()
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()


def seat_spec(address: str, token_env: str | None, algorithm: str = "Random", num: int = 1) -> dict:
    remote = {"address": address, **({"token_env": token_env} if token_env else {})}
    return {"agent": [{"name": algorithm.lower(), "algorithm": {"name": algorithm}}],
            "env": [{"name": "connect_four", "remote": remote, "max_frame": 300}], "body": {"num": num},
            "meta": {"max_session": 1, "random_seed": 0}}


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.long  # 8-30 s of the default run (5 min on 2 cores)
def test_two_labs_play_the_seats_of_one_multi_agent_judge_by_their_tokens(tmp_path: Path) -> None:
    """Agents of different people meet: each lab plays one seat of a connect four judge, admitted by its token
    (read from the variable `remote.token_env` names), the two labs in their own processes."""
    address = serve("connect_four", client_timeout=20.0)
    try:
        tokens = judge_for(address).tokens
        procs = []
        for i, (seat, algorithm) in enumerate(zip(sorted(tokens), ("PPO", "Random"))):
            spec = tmp_path / f"seat{i}.json"
            raw = seat_spec(address, "SEAT_TOKEN", algorithm)
            raw["env"][0].pop("max_frame")
            raw["env"][0]["max_episode"] = 12  # both seats end with the same game: neither waits for a gone player
            spec.write_text(json.dumps(raw))
            env = {**child_environment(str(ROOT)), "SEAT_TOKEN": tokens[seat]}
            procs.append(subprocess.Popen([sys.executable, str(ROOT / "run_lab.py"), str(spec), "--out",
                                           str(tmp_path / f"out{i}"), "-q"], cwd=ROOT, env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for proc in procs:
            out, err = proc.communicate(timeout=100)
            assert proc.returncode == 0, err
        summaries = [json.loads(next((tmp_path / f"out{i}").glob("*/trial.json")).read_text()) for i in range(2)]
        assert not any(math.isnan(s["pairs"][0]["mean_return_100"]) for s in summaries)  # each saw whole games
        assert judge_for(address).episodes >= 12
    finally:
        shutdown(address)


def test_a_seat_is_one_body_and_its_token_is_checked(monkeypatch) -> None:
    address = serve("connect_four")
    try:
        token = next(iter(judge_for(address).tokens.values()))
        monkeypatch.setenv("SEAT_TOKEN", token)
        monkeypatch.setenv("WRONG_TOKEN", "00" * 16)
        validate(seat_spec(address, "SEAT_TOKEN"), "t")  # one body with its seat's token: accepted
        for raw, message in [
            (seat_spec(address, "SEAT_TOKEN", num=2), r"^env\[0\]\.remote: .* whose seats are one body each, and this "
                                                      r"entry has 2"),
            (seat_spec(address, None), r"^env\[0\]\.remote: .*token_required.*name the variable holding it in "
                                       r"remote\.token_env$"),
            (seat_spec(address, "NO_SUCH_TOKEN_VARIABLE"), r"^env\[0\]\.remote\.token_env: environment variable "
                                                           r"NO_SUCH_TOKEN_VARIABLE is not set$"),
            (seat_spec(address, "WRONG_TOKEN"), r"^env\[0\]\.remote\.token_env: .*unknown_token"),
        ]:
            with pytest.raises(SpecError, match=message):
                validate(raw, "t")
    finally:
        shutdown(address)


@pytest.mark.timeout(120)
def test_a_lab_seat_of_a_masked_game_moves_only_where_its_mask_allows(monkeypatch) -> None:
    """A lab playing a seat of a hosted tic-tac-toe gets the game's legal-action mask, not as features but as the
    mask its agent acts within: the other seat moves first and needs 3 moves to win, so a lab seat that loses
    after fewer than 2 of its own moves made an illegal one (PettingZoo ends the game on it with -1)."""
    address = serve("pettingzoo.classic.tictactoe_v3:env", multi=True, client_timeout=20.0)
    try:
        tokens = judge_for(address).tokens
        first, second = sorted(tokens)
        monkeypatch.setenv("SEAT_TOKEN", tokens[second])
        raw = {"agent": [{"name": "r", "algorithm": {"name": "Random"}}],
               "env": [{"name": "pettingzoo.classic.tictactoe_v3:env", "max_episode": 40,
                        "remote": {"address": address, "token_env": "SEAT_TOKEN"}}],
               "meta": {"random_seed": 3}}
        spec = validate(raw, "seat")
        assert spec.env[0].remote is not None
        with first_legal_opponent(address, tokens[first]):
            result = Session(spec, seed=3).run()
        rows = [r for m in result.metrics.values() for r in m.rows]
        assert len(rows) >= 40
        assert all(r["t"] >= 2 for r in rows if r["return"] < 0), rows  # no loss by an illegal move
    finally:
        shutdown(address)
