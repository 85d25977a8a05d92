"""Real processes, real sockets: `python run_lab.py serve SPEC` hosts a turn-based game, and two player processes
that know nothing of each other play it with random legal moves read from their observation's action mask."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from slm_lab_like.remote.spawn import child_environment

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parent.parent
GAMES = 20

# The default run plays PettingZoo's tic-tac-toe and the "null" fallback; the built-in game and the "done" fallback
# (4-5 s of CPU each, the same code paths) are the long tier's.
LONG = (pytest.mark.slow, pytest.mark.long)

PLAYER = r"""
import json, sys, time
import numpy as np
from slm_lab_like.remote import RemoteEnv
address, token, games, seed, stall_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
env = RemoteEnv(address, token=token, timeout=20)
rng = np.random.default_rng(seed)
moves = 0
for game in range(games):
    obs, info = env.reset()
    rewards, walls = [], []
    while True:
        legal = np.flatnonzero(obs["action_mask"])
        if legal.size == 0:
            raise SystemExit(f"no legal move on my turn: {obs}")
        if moves == stall_at:
            print(json.dumps({"event": "stalled"}), flush=True)
            time.sleep(3600)
        start = time.monotonic()
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(legal)))
        walls.append(time.monotonic() - start)
        rewards.append(reward)
        moves += 1
        if terminated or truncated:
            break
    print(json.dumps({"event": "game", "body": env.body, "game": game, "rewards": rewards, "terminated": terminated,
                      "truncated": truncated, "info": info, "walls": walls}, default=str), flush=True)
env.close()
"""


class Process:
    """A child process whose stdout lines a reader thread collects, so a test can wait for one with a timeout."""

    def __init__(self, args: list[str], environ: dict[str, str]) -> None:
        self.proc = subprocess.Popen(args, cwd=REPO, text=True, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     env=environ)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def line(self, timeout: float) -> dict:
        """The next JSON line (AssertionError when the process ends or stays silent first)."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("process silent") from None
        if line is None:
            raise AssertionError(f"process exited with {self.proc.wait(5)}")
        return json.loads(line)


def serve(procs: list, tmp_path: Path, env_name: str, *options: str) -> dict:
    """Start `run_lab.py serve` on a one-env spec with these command-line options; return its JSON line (address and
    tokens)."""
    spec = {"agent": [{"name": "random", "algorithm": {"name": "Random"}}],
            "env": [{"name": env_name, "max_frame": 1000}], "body": {"product": "outer", "num": 2},
            "meta": {"max_session": 1}}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    proc = Process([sys.executable, "run_lab.py", "serve", str(path), "-q", *options], child_environment(str(REPO)))
    procs.append(proc)
    return proc.line(30)


def player(procs: list, address: str, token: str, seed: int, games: int = GAMES, stall_at: int = -1) -> Process:
    """Start one player process."""
    proc = Process([sys.executable, "-c", PLAYER, address, token, str(games), str(seed), str(stall_at)],
                   child_environment(str(REPO)))
    procs.append(proc)
    return proc


@pytest.mark.parametrize("env_name", [pytest.param("connect_four", marks=LONG), "pettingzoo.classic.tictactoe_v3:env"])
def test_two_player_processes_play_twenty_games(procs, tmp_path, env_name):
    """Both players finish every game; each game is a win and a loss (+1 / -1) or a draw (0 / 0)."""
    hosted = serve(procs, tmp_path, env_name)
    assert hosted["env"] == env_name and len(hosted["tokens"]) == 2
    players = [player(procs, hosted["address"], token, seed) for seed, token in enumerate(hosted["tokens"].values())]
    results = [[p.line(30) for _ in range(GAMES)] for p in players]
    assert [p.proc.wait(20) for p in players] == [0, 0]
    assert {results[0][0]["body"], results[1][0]["body"]} == set(hosted["tokens"])
    outcomes = set()
    for a, b in zip(*results):
        assert a["game"] == b["game"] and a["terminated"] and b["terminated"]
        assert not a["info"].get("illegal_move") and not b["info"].get("illegal_move")
        assert all(r == 0 for r in a["rewards"][:-1] + b["rewards"][:-1])
        assert a["rewards"][-1] == -b["rewards"][-1] and a["rewards"][-1] in (-1.0, 0.0, 1.0)
        outcomes.add(a["rewards"][-1])
    assert outcomes & {1.0, -1.0}


@pytest.mark.parametrize("on_timeout", ["null", pytest.param("done", marks=LONG)])
def test_sigkilled_player_the_other_ends_its_game_and_resets(procs, tmp_path, on_timeout):
    """player_1 is SIGKILLed on its turn: player_0's step returns about one client timeout (1 s) later, its game
    ends cleanly against the fallback moves, and it plays a whole new game."""
    hosted = serve(procs, tmp_path, "connect_four", "--client-timeout", "1", "--on-timeout", on_timeout)
    tokens = hosted["tokens"]
    first = player(procs, hosted["address"], tokens["player_0"], 0, games=2)
    second = player(procs, hosted["address"], tokens["player_1"], 1, stall_at=3)
    assert second.line(30)["event"] == "stalled"
    os.kill(second.proc.pid, signal.SIGKILL)
    killed = time.monotonic()
    games = [first.line(10), first.line(10)]
    assert time.monotonic() - killed < 6.0
    for game in games:
        assert game["terminated"] or (game["truncated"] and "reason" in game["info"])
    walls = games[0]["walls"]
    assert 0.8 < max(walls) < 3.5 and sorted(walls)[-2] < 0.8
    assert max(games[1]["walls"]) < 0.8
    assert first.proc.wait(20) == 0
