"""PPO on CartPole-v1 with 64 bodies: the native vector kind against copies, wall-clock to a 100-episode mean of 475.

The spec is spec/benchmark/ppo_cartpole.json with 64 bodies (n_steps scaled down so that a batch holds as many frames
as the spec's own bodies times steps) and `target_return: 475`, which ends a run as soon as the mean of the last 100
episodes reaches it.
The two sides differ only in `vector` ("native": gymnasium's numpy CartPoleVectorEnv; "sync": 64 CartPoleEnv copies
stepped in turn); runs alternate (native, sync, sync, native, ...) over --seeds seeds. Per side it prints each
seed's wall-clock and frames to the target (or "not reached" within --frames), the medians, and the ratio of the
median wall-clocks, sync / native (above 1: native is faster), and of the median frames per second, native / sync
(training dominates both: the env's share of a PPO step is small).
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.load import validate

SPEC = Path(__file__).resolve().parent.parent / "spec" / "benchmark" / "ppo_cartpole.json"
TARGET = 475.0
BODIES = 64


def race_spec(vector: str, frames: int, seed: int) -> dict:
    """The benchmark PPO spec at 64 bodies, stopping at the target, with `vector` chosen."""
    raw = copy.deepcopy(json.loads(SPEC.read_text()))
    memory = raw["agent"][0]["memory"]
    memory["n_steps"] = max(1, memory["n_steps"] * raw["body"]["num"] // BODIES)
    raw["env"][0].update(max_frame=frames, target_return=TARGET, vector=vector)
    raw["body"]["num"] = BODIES
    raw["meta"].update(max_session=1, random_seed=seed, log_frequency=10 * frames)
    return raw


def run(vector: str, frames: int, seed: int) -> tuple[float, int, bool]:
    """Wall-clock seconds and frames of one run, and whether it reached the target."""
    spec = validate(race_spec(vector, frames, seed), f"race_{vector}")
    start = time.perf_counter()
    result = Session(spec, seed=seed).run()
    wall = time.perf_counter() - start
    return wall, result.env_frames[0], result.pair_mean_return(0, 0) >= TARGET


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=3, help="seeds per side (default 3)")
    p.add_argument("--frames", type=int, default=150_000, help="frame budget of a run (default 150,000, the spec's)")
    a = p.parse_args()
    for vector in ("native", "sync"):  # the first run of a process pays torch's lazy imports: untimed
        run(vector, 3000, 0)
    results: dict[str, list[tuple[float, int, bool]]] = {"native": [], "sync": []}
    for seed in range(a.seeds):
        order = ("native", "sync") if seed % 2 == 0 else ("sync", "native")
        for vector in order:
            wall, frames, reached = run(vector, a.frames, seed)
            results[vector].append((wall, frames, reached))
            print(f"seed {seed} {vector:>6}: {wall:6.1f} s, {frames:,} frames ({frames / wall:,.0f} fps), "
                  f"{'reached 475' if reached else 'not reached'}", flush=True)
    medians, fps = {}, {}
    for vector, runs in results.items():
        solved = [w for w, _, ok in runs if ok]
        medians[vector] = statistics.median(w for w, _, _ in runs)
        fps[vector] = statistics.median(f / w for w, f, _ in runs)
        print(f"{vector:>6}: {len(solved)}/{len(runs)} seeds reached 475; median wall-clock {medians[vector]:.1f} s, "
              f"median frames {statistics.median(f for _, f, _ in runs):,.0f}, median fps {fps[vector]:,.0f}")
    print(f"ratio sync / native wall-clock {medians['sync'] / medians['native']:.2f}; "
          f"ratio native / sync fps {fps['native'] / fps['sync']:.2f}")


if __name__ == "__main__":
    main()
