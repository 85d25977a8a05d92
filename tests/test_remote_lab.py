"""Remote envs inside the lab: spec entries with `remote`, and `run_lab.py serve`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from slm_lab_like.experiment.session import Session
from slm_lab_like.remote import RemoteEnv, serve, shutdown
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.load import validate
from tests.conftest import random_spec

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
        raw["env"][0].update(remote=address, max_t=5, name="anything")
        result = Session(validate(raw, "t"), seed=1).run()
        assert result.env_frames == [200]
        assert all(r["t"] <= 5 for m in result.metrics.values() for r in m.rows)
    finally:
        shutdown(address)


@pytest.mark.parametrize("change,message", [
    ({"remote": "http://x:1"}, r'^env\[0\]\.remote: expected "spawn" or a judge address like "tcp://127.0.0.1:5555", got "http://x:1"$'),
    ({"remote": "spawn", "vector": "async"}, r'^env\[0\]\.vector: a remote env is stepped through its judge; expected "auto" or "sync", got "async"$'),
    ({"remote": "spawn", "name": "CartPol-v1"}, r'^env\[0\]\.name: unknown env "CartPol-v1"'),
    ({"remote": 5}, r"^env\[0\]\.remote: expected a string or an object or null, got 5$"),
    ({"remote": "spawn", "name": "pettingzoo.classic.tictactoe_v3:env"},
     r'^env\[0\]\.remote: "pettingzoo.classic.tictactoe_v3:env" is a multi-agent env, and a remote entry\'s bodies '
     r"are single-agent clients of a judge: drop `remote` .* with its token$"),
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
