"""A client in another language: clients/node/judge_client.mjs, written from docs/PROTOCOL.md alone (Node with the
zeromq and @msgpack/msgpack packages), plays CartPole-v1 through a single judge and connect four through a
multi-agent judge. Skipped with a reason where Node or its packages cannot be had."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import gymnasium as gym
import pytest

from slm_lab_like.remote import serve, shutdown, spawn_judge, stop_judge
from slm_lab_like.remote.hosting import judge_for

CLIENT = Path(__file__).resolve().parent.parent / "clients" / "node"
# Under `long`: they install the client's packages from the npm registry (a clean clone's first run), and one run of
# the whole default suite saw the freshly installed zeromq addon fail to load in its worker. One worker runs both
# tests, so `npm ci` (which empties node_modules first) never runs under the other's feet.
pytestmark = [pytest.mark.timeout(180), pytest.mark.slow, pytest.mark.long, pytest.mark.xdist_group("node_client")]


@pytest.fixture(scope="module")
def node() -> str:
    """The node command, with the client's packages installed (npm ci from the lock file, once)."""
    exe = shutil.which("node")
    if exe is None or shutil.which("npm") is None:
        pytest.skip("Node.js and npm are not installed")
    if not (CLIENT / "node_modules" / "zeromq").is_dir():
        done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=CLIENT, capture_output=True, text=True,
                              timeout=170)
        if done.returncode != 0:
            pytest.skip(f"npm could not install the client's packages: {done.stderr.strip()[-200:]}")
    return exe


def play(node: str, address: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([node, str(CLIENT / "judge_client.mjs"), address, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def lines(proc: subprocess.Popen) -> list[dict]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, (out, err)
    return [json.loads(line) for line in out.splitlines()]


def heuristic_returns(episodes: int) -> list[float]:
    """The Node client's CartPole policy played in this process on gymnasium's env, seeds 0, 1, ..."""
    env = gym.make("CartPole-v1")
    returns = []
    for seed in range(episodes):
        obs, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(int(obs[2] + obs[3] > 0))
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    return returns


def test_the_node_client_plays_cartpole_through_a_judge_as_gymnasium_does(node: str) -> None:
    proc, address = spawn_judge("CartPole-v1")
    try:
        rows = lines(play(node, address, "--episodes", "3", "--policy", "cartpole"))
    finally:
        stop_judge(proc)
    assert rows[-1] == {"done": True}
    assert [r["return"] for r in rows[:-1]] == heuristic_returns(3)  # every observation read exactly
    assert all(r["return"] == r["length"] for r in rows[:-1])


def test_two_node_clients_play_connect_four_through_a_turn_based_judge(node: str) -> None:
    address = serve("connect_four")
    try:
        tokens = judge_for(address).tokens
        procs = {body: play(node, address, "--token", token, "--episodes", "2", "--policy", "first_legal")
                 for body, token in tokens.items()}
        rows = {body: lines(proc) for body, proc in procs.items()}
    finally:
        shutdown(address)
    first, second = rows["player_0"][:-1], rows["player_1"][:-1]
    assert [r["return"] for r in first] == [1, 1] and [r["return"] for r in second] == [-1, -1]
    assert [r["length"] for r in first] == [10, 10] and [r["length"] for r in second] == [9, 9]


def test_the_node_client_passes_the_client_side_of_the_compliance_kit(node: str) -> None:
    """The examining judge relays one session of the Node client and checks its side of the protocol, the
    retransmit of a step whose reply it held back included."""
    from slm_lab_like.remote.client_compliance import CHECKS, Examiner

    examiner = Examiner(steps=5, withhold=3, timeout=20.0)
    proc = play(node, examiner.address, "--episodes", "1", "--timeout", "1")
    results = examiner.run()
    assert lines(proc)[-1] == {"done": True}
    assert {r.name: r.detail for r in results} == {name: "" for name in CHECKS}
