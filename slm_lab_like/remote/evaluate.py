"""Hosted evaluation: score a submitted agent against a judge and write a JSON report.

A submission is a Python file exposing ``policy(obs) -> action``. It runs in its OWN subprocess that
connects to an in-process judge as an ordinary :class:`~slm_lab_like.remote.client.RemoteEnv`; the judge,
not the agent, chooses every episode's seed and counts returns, so a submission cannot misreport its
score. Each episode has a wall-clock limit; a submission that overruns it, crashes or sends invalid
actions gets an error for that episode (one line: the exception it died of; the tail of its stderr is kept beside
it as ``agent_stderr``) and is restarted for the rest. Results are data (JSON), never
code. Note that the subprocess isolates crashes, not privileges: run untrusted code in a sandbox user
or container.

Command line: ``python -m slm_lab_like.remote.evaluate AGENT.py --env CartPole-v1 --episodes 10
--time-limit 30 --out report.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from slm_lab_like.remote.spawn import child_environment
from slm_lab_like.remote.server import JudgeServer

_STDERR_TAIL = 2000


def evaluate(
    agent_path: str,
    env: Any,
    *,
    episodes: int = 10,
    episode_time_limit: float = 60.0,
    seed: int = 0,
    env_kwargs: dict | None = None,
    report_path: str | None = None,
    startup_timeout: float = 60.0,
    python: str = sys.executable,
) -> dict:
    """Run the agent file for ``episodes`` judge-seeded episodes and return (and optionally write) the report."""
    seeds = [seed + i for i in range(episodes)]
    results: list[dict] = []
    errors: list[str] = []
    while len(results) < episodes:
        done_before = len(results)
        attempt = _run_attempt(agent_path, env, env_kwargs, seeds[done_before:], episode_time_limit,
                               startup_timeout, python)
        for record in attempt["records"]:
            if len(results) >= episodes:
                break
            entry = {"episode": len(results), "seed": record["seed"], "return": record["return"],
                     "length": record["length"], "terminated": record["terminated"],
                     "truncated": record["truncated"], "wall_s": round(record["wall_s"], 4),
                     "error": None if record["completed"] else "abandoned: reset before the episode ended"}
            results.append(entry)
        if len(results) < episodes and attempt["error"] is not None:
            errors.append(f"episode {len(results)}: {attempt['error']}")
            results.append({"episode": len(results), "seed": seeds[len(results)], "return": None, "length": None,
                            "terminated": False, "truncated": False, "wall_s": attempt["wall_s"],
                            "error": attempt["error"],
                            **({"agent_stderr": attempt["stderr"]} if attempt["stderr"] else {})})
        elif len(results) == done_before:
            errors.append(f"episode {len(results)}: agent made no progress")
            results.append({"episode": len(results), "seed": seeds[len(results)], "return": None, "length": None,
                            "terminated": False, "truncated": False, "wall_s": attempt["wall_s"],
                            "error": "agent made no progress"})
    returns = [r["return"] for r in results if r["error"] is None and r["return"] is not None]
    mean = sum(returns) / len(returns) if returns else None
    std = math.sqrt(sum((x - mean) ** 2 for x in returns) / len(returns)) if returns else None
    report = {"agent": os.path.basename(agent_path), "env": env if isinstance(env, str) else repr(env),
              "episodes": episodes, "episode_time_limit": episode_time_limit, "seed": seed,
              "results": results, "mean_return": mean, "std_return": std, "n_completed": len(returns),
              "n_errors": len(results) - len(returns), "errors": errors}
    if report_path is not None:
        _write_json(report_path, report)
    return report


def _run_attempt(agent_path: str, env: Any, env_kwargs: dict | None, seeds: list[int], limit: float,
                 startup_timeout: float, python: str) -> dict:
    """Serve the remaining seeds to one agent subprocess until it finishes, fails or overruns an episode."""
    records: list[dict] = []
    lock = threading.Lock()

    def on_episode(record: dict) -> None:
        with lock:
            records.append(record)

    judge = JudgeServer(env, env_kwargs=env_kwargs, max_sessions=1, episode_seeds=seeds,
                        episode_callback=on_episode)
    address = judge.start()
    error: str | None = None
    tail = ""
    start = time.monotonic()
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            [python, "-m", "slm_lab_like.remote.evaluate", "--run-agent", os.path.abspath(agent_path),
             "--address", address, "--episodes", str(len(seeds)), "--timeout", str(limit + 5)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=child_environment())
        try:
            while proc.poll() is None:
                time.sleep(0.02)
                with lock:
                    completed = sum(1 for r in records if r["completed"])
                if completed >= len(seeds):
                    proc.wait(5)
                    break
                elapsed = judge.episode_elapsed()
                if elapsed is None and not records and time.monotonic() - start > startup_timeout:
                    error = f"agent did not start an episode within {startup_timeout}s"
                    break
                if elapsed is not None and elapsed > limit:
                    error = f"episode exceeded the wall-clock limit of {limit}s"
                    break
            else:
                if proc.returncode != 0:  # the error is the last line (the exception); the report keeps the tail
                    stderr.seek(0)
                    tail = stderr.read().decode("utf-8", "replace")[-_STDERR_TAIL:].strip()
                    last = tail.splitlines()[-1] if tail else "no output"
                    error = f"agent process exited with code {proc.returncode}: {last}"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
            judge.stop()
    with lock:
        finished = list(records)
    if error is not None and finished and not finished[-1]["completed"]:
        finished.pop()
    return {"records": finished, "error": error, "stderr": tail, "wall_s": round(time.monotonic() - start, 4)}


def _write_json(path: str, data: dict) -> None:
    """Write JSON atomically (temp file then rename)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".json.tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, allow_nan=False)
    os.replace(tmp, path)


def run_agent(agent_path: str, address: str, episodes: int, timeout: float) -> None:
    """Agent-side loop (runs in the submission's subprocess): play ``episodes`` episodes with ``policy``."""
    from slm_lab_like.remote.client import RemoteEnv

    spec = importlib.util.spec_from_file_location("submitted_agent", agent_path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {agent_path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    policy = getattr(module, "policy")
    env = RemoteEnv(address, timeout=timeout, retries=0)
    try:
        for _ in range(episodes):
            obs, _ = env.reset()
            while True:
                obs, _, terminated, truncated, _ = env.step(policy(obs))
                if terminated or truncated:
                    break
    finally:
        env.close()


def main(argv: list[str] | None = None) -> None:
    """Command line: evaluate a submission, or (internal) run one as the agent subprocess."""
    ap = argparse.ArgumentParser(prog="python -m slm_lab_like.remote.evaluate")
    ap.add_argument("agent", nargs="?", help="Python file exposing policy(obs) -> action")
    ap.add_argument("--env", default="CartPole-v1", help="env the judge hosts (default CartPole-v1)")
    ap.add_argument("--kwargs", default="{}", help="JSON object of env keyword arguments")
    ap.add_argument("--episodes", type=int, default=10, help="episodes to score (default 10)")
    ap.add_argument("--time-limit", type=float, default=60.0, help="wall-clock seconds per episode (default 60)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the first episode; the judge seeds each (default 0)")
    ap.add_argument("--out", default=None, help="path of the whole JSON report (a summary line is printed either way)")
    ap.add_argument("--run-agent", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--address", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=60.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.run_agent:
        run_agent(args.run_agent, args.address, args.episodes, args.timeout)
        return
    if not args.agent:
        ap.error("give the agent file")
    try:
        env_kwargs = json.loads(args.kwargs)
    except json.JSONDecodeError as e:
        ap.error(f"--kwargs: not a JSON object: {e}")
    if not isinstance(env_kwargs, dict):
        ap.error(f"--kwargs: expected a JSON object, got {args.kwargs}")
    report = evaluate(args.agent, args.env, episodes=args.episodes, episode_time_limit=args.time_limit,
                      seed=args.seed, env_kwargs=env_kwargs, report_path=args.out)
    print(json.dumps({k: report[k] for k in ("mean_return", "std_return", "n_completed", "n_errors")}))


if __name__ == "__main__":
    main()
