"""Trial launch overhead of a search: the same 20 short trials on the lab's local process pool and on Ray Tune.

Each trial is one session of a Random (or, with --agent ppo, a small PPO) agent on CartPole-v1 for --frames
frames; the trials differ only in meta.log_frequency (drawn by the search), so the work per trial is the
same on both sides. Both sides use every core of this machine and run through `run_experiment`, writing
their usual results into a temporary directory. Wall-clock seconds are printed per side, with the ratio
local / ray (below 1: the local pool is faster). Ray's start-up (`ray.init`) is timed apart and shown in
both ratios, with and without it. Runs alternate sides, --repeats times; medians are compared.
"""
from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time

from slm_lab_like.experiment.search import run_experiment
from slm_lab_like.logs import configure_logging

AGENTS = {
    "random": {"name": "random", "algorithm": {"name": "Random"}},
    "ppo": {"name": "ppo", "algorithm": {"name": "PPO", "n_epochs": 4, "minibatch_size": 64},
            "memory": {"name": "OnPolicyBatch", "n_steps": 32}, "net": {"name": "MLP", "hid_layers": [32]}},
}


def workload(trials: int, frames: int, agent: str) -> dict:
    """A raw spec whose search is `trials` trials of one short session each."""
    return {"agent": [AGENTS[agent]],
            "env": [{"name": "CartPole-v1", "max_frame": frames}],
            "meta": {"max_session": 1, "max_trial": trials, "random_seed": 0},
            "search": {"meta": {"log_frequency__randint": [frames, 2 * frames]}}}


def timed_search(raw: dict, backend: str) -> float:
    """Wall seconds of one search on `backend` (results go to a temporary directory)."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = run_experiment(raw, "bench", tmp, backend=backend)
        wall = time.perf_counter() - start
    assert all(r["status"] == "done" for r in result.records), result.table
    return wall


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--frames", type=int, default=5000)
    p.add_argument("--agent", choices=tuple(AGENTS), default="random")
    p.add_argument("--repeats", type=int, default=1)
    a = p.parse_args()
    configure_logging(logging.WARNING)
    import ray

    raw = workload(a.trials, a.frames, a.agent)
    start = time.perf_counter()
    ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    ray_start = time.perf_counter() - start
    locals_, rays = [], []
    try:
        for _ in range(a.repeats):
            locals_.append(timed_search(raw, "local"))
            rays.append(timed_search(raw, "ray"))
    finally:
        ray.shutdown()
    local, tune = statistics.median(locals_), statistics.median(rays)
    print(f"{a.trials} trials x {a.frames} frames ({a.agent}): local pool {local:.1f} s, Ray Tune {tune:.1f} s "
          f"(+ {ray_start:.1f} s ray.init)")
    print(f"ratio local / ray: {local / tune:.3f} without ray.init, {local / (tune + ray_start):.3f} with it")


if __name__ == "__main__":
    main()
