"""`--ray-address` joins a running Ray cluster: a head node started here on 127.0.0.1 (every Ray process on the
loopback address), a 2 x 2 search run against it from the command line, its trials found in that cluster's logs."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.layout import ROOT
from tests.test_search import check_experiment, tiny_search_spec

pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.long]  # a Ray head node and a search against it: a minute

# On 127.0.0.1 (as slm_lab_like.experiment.ray_backend sets it), with Ray's token authentication on and a token of
# the test's own (else Ray's choice depends on whether ~/.ray/auth_token happens to exist).
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def ray_head():
    """A Ray head node on 127.0.0.1 with its own temp dir (short: Ray's socket paths must fit 107 bytes); yields
    (address, temp dir); stopping the blocking `ray start` stops this cluster only, not other tests' Rays."""
    port, temp = free_port(), Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
    ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"
    head = subprocess.Popen(
        [ray, "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(port),
         "--ray-client-server-port", str(free_port()), "--num-cpus", "2", "--include-dashboard", "false",
         "--disable-usage-stats", "--temp-dir", str(temp)],
        env={**os.environ, **RAY_ENV}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    deadline = time.monotonic() + 90
    while not listening(port):
        assert head.poll() is None and time.monotonic() < deadline, f"ray start failed:\n{head.stdout.read()}"
        time.sleep(0.5)
    yield f"127.0.0.1:{port}", temp
    head.send_signal(signal.SIGTERM)
    try:
        head.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(head.pid, signal.SIGKILL)
    shutil.rmtree(temp, ignore_errors=True)


def test_search_joins_a_ray_cluster_on_loopback(ray_head, tmp_path: Path) -> None:
    address, temp = ray_head
    spec = tmp_path / "search.json"
    spec.write_text(json.dumps(tiny_search_spec()))
    driver = subprocess.Popen([sys.executable, "run_lab.py", "search", str(spec), "--ray-address", address,
                               "--out", str(tmp_path / "data"), "-q"], cwd=ROOT, env={**os.environ, **RAY_ENV},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = driver.communicate(timeout=600)
    assert driver.returncode == 0, stderr[-3000:]
    (out,) = (tmp_path / "data").glob("search_*")
    experiment = json.loads((out / "experiment.json").read_text())
    assert experiment["backend"] == "ray"
    check_experiment(out, experiment["trials"])
    logs = temp / "session_latest" / "logs"
    assert list(logs.glob(f"python-core-driver-*_{driver.pid}.log")), "the search's driver did not join this cluster"
    results = [json.loads(line) for f in (out / "ray" / "tune").glob("*/result.json") for line in f.open()]
    assert {r["node_ip"] for r in results} == {"127.0.0.1"} and {r["pid"] for r in results} - {driver.pid}
    workers = {p.name.split("_")[-1].split(".")[0] for p in logs.glob("python-core-worker-*.log")}
    assert {str(r["pid"]) for r in results} <= workers, "the trials ran outside this cluster's workers"


def test_the_labs_private_ray_stays_on_loopback(tmp_path: Path) -> None:
    """Without --ray-address the lab starts its own Ray, on 127.0.0.1 by its own setting (not the tests')."""
    spec = tmp_path / "search.json"
    raw = tiny_search_spec()
    raw["search"] = {"agent": [{"algorithm": {"lam__grid_search": [0.95]}}]}
    spec.write_text(json.dumps(raw))
    env = {k: v for k, v in os.environ.items() if k not in RAY_ENV}
    out = subprocess.run([sys.executable, "run_lab.py", "search", str(spec), "--backend", "ray",
                          "--out", str(tmp_path / "data"), "-q"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    results = [json.loads(line) for f in (tmp_path / "data").glob("search_*/ray/tune/*/result.json") for line in f.open()]
    assert results and {r["node_ip"] for r in results} == {"127.0.0.1"}
