"""A dead seat must not slow the living: four player processes in a 4-body tag arena behind a multi-agent judge; one is
SIGKILLed; the three survivors' step rate after the first timeout against before.

For each client timeout (--timeouts, 3 s and 10 s by default; the join timeout is the client timeout), with short
episodes (--cycles steps): the players step with random actions and print a line per episode (steps, seconds); after
--before episodes of every player, player 3 is killed; the survivors' steps per second over their episodes before
the kill, and over their episodes after the first one that ended past the kill (that one holds the one timeout),
are compared: the ratio after / before (target >= 0.9). The first game after the kill is left out on purpose: the
judge waits one timeout for a missing player, once.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

from slm_lab_like.remote import spawn_judge, stop_judge

PLAYER = r"""
import json, sys, time
from slm_lab_like.remote import RemoteEnv
env = RemoteEnv(sys.argv[1], token=sys.argv[2], timeout=60)
env.action_space.seed(int(sys.argv[3]))
while True:
    t0, steps = time.monotonic(), 0  # a game's time from its reset: a join wait counts
    env.reset()
    while True:
        _, _, te, tr, _ = env.step(env.action_space.sample())
        steps += 1
        if te or tr:
            break
    print(json.dumps({"steps": steps, "seconds": time.monotonic() - t0, "end": time.monotonic()}), flush=True)
"""


def run(timeout: float, cycles: int, before: int, after: int) -> tuple[float, float]:
    """Survivors' steps per second before the kill and after its first timeout."""
    proc, address = spawn_judge("tag_arena", multi=True, env_kwargs={"max_cycles": cycles},
                                client_timeout=timeout)
    tokens = proc.judge_info["tokens"]
    players = [subprocess.Popen([sys.executable, "-c", PLAYER, address, tokens[name], str(i)], stdout=subprocess.PIPE,
                                text=True) for i, name in enumerate(sorted(tokens))]
    try:
        lines: list[list[dict]] = [[] for _ in players]
        for i, p in enumerate(players):
            while len(lines[i]) < before:
                lines[i].append(json.loads(p.stdout.readline()))
        os.kill(players[-1].pid, signal.SIGKILL)
        killed = time.monotonic()
        for i, p in enumerate(players[:-1]):
            while sum(1 for e in lines[i] if e["end"] > killed) < after + 1:
                lines[i].append(json.loads(p.stdout.readline()))
        rate = {"before": [], "after": []}
        for i in range(len(players) - 1):
            pre = [e for e in lines[i] if e["end"] <= killed][1:]  # the first game waited for players to join
            post = [e for e in lines[i] if e["end"] > killed][1:]  # the first game after the kill holds the timeout
            rate["before"].append(sum(e["steps"] for e in pre) / sum(e["seconds"] for e in pre))
            rate["after"].append(sum(e["steps"] for e in post) / sum(e["seconds"] for e in post))
        return statistics.median(rate["before"]), statistics.median(rate["after"])
    finally:
        for p in players:
            p.kill()
            p.wait()
        stop_judge(proc)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--timeouts", type=float, nargs="+", default=[3.0, 10.0])
    p.add_argument("--cycles", type=int, default=40, help="steps a game (short episodes)")
    p.add_argument("--before", type=int, default=6, help="games of every player before the kill")
    p.add_argument("--after", type=int, default=10, help="games of each survivor measured after the timeout game")
    a = p.parse_args()
    for timeout in a.timeouts:
        before, after = run(timeout, a.cycles, a.before, a.after)
        print(f"client timeout {timeout:g} s, {a.cycles}-step games: survivors' steps/s before {before:,.0f}, after "
              f"{after:,.0f}: ratio {after / before:.3f} (target >= 0.9)", flush=True)


if __name__ == "__main__":
    main()
