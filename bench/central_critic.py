"""Centralized vs independent critics for PPO on the cooperative spread game: same frames, same seeds.

Runs spec/coop_spread_independent.json (`critic: "own"`) and spec/coop_spread_central.json (`critic: "central"`),
which differ in that key only: one PPO agent owns the 6 bodies of a spread game (parameter sharing) where each
agent sees the landmarks, its own index and only the teammates within 0.3 (`sight`), so its own observation
cannot tell the team's reward; each body's actor sees its own observation; the critic sees the body's own
observation, or the joint observation of the 6 bodies with the body's id. Every body gets the shared team reward,
so body 0's episode return is the team's.

For each critic and seed (default 1, 2, 3) it trains --frames env frames (body-steps) and prints the final team
return (the 100-episode mean at the end), the frames at which the 100-episode mean first reached --threshold
(counted once 100 episodes are in the window), and the wall time; then the mean and std over seeds, and writes a
PNG of both learning curves (mean over seeds, band from the lowest to the highest seed; from the first full
100-episode window on) and the curves as JSON beside it. Runs go through the lab's Session, --jobs at a time in
worker processes (one core each). --kwargs overrides the spread kwargs of both specs (n_agents sets the bodies).

    python bench/central_critic.py [--frames 1200000] [--seeds 1 2 3] [--threshold -80] [--jobs 1]
                                   [--at 300000] [--out data/central_critic.png]
                                   [--kwargs '{"n_agents": 3, "sight": null}'] [--curves data/central_critic.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SPECS = {"independent": ROOT / "spec" / "coop_spread_independent.json",
         "central": ROOT / "spec" / "coop_spread_central.json"}


def run(critic: str, seed: int, frames: int, kwargs: dict[str, Any]) -> dict[str, Any]:
    """One session of one spec: its body-0 curve (env frame, episodes so far, 100-episode mean) and wall time."""
    from slm_lab_like.experiment.session import Session
    from slm_lab_like.spec.load import read_file, validate

    (raw,) = read_file(SPECS[critic]).values()
    raw["env"][0]["max_frame"] = frames
    raw["env"][0]["kwargs"] = {**raw["env"][0].get("kwargs", {}), **kwargs}
    raw["body"]["num"] = raw["env"][0]["kwargs"].get("n_agents", raw["body"]["num"])
    raw["meta"] = {**raw.get("meta", {}), "log_frequency": 10**9, "max_session": 1}
    start = time.perf_counter()
    result = Session(validate(raw, f"coop_spread_{critic}"), seed=seed).run()
    rows = result.metrics[(0, 0, 0)].rows
    return {"critic": critic, "seed": seed, "wall": time.perf_counter() - start,
            "curve": [(r["env_frame"], r["episode"], r["mean_return_100"]) for r in rows]}


def setting(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The spread kwargs both runs use: the specs' own, overridden by `kwargs`."""
    from slm_lab_like.spec.load import read_file

    (raw,) = read_file(SPECS["central"]).values()
    return {**raw["env"][0].get("kwargs", {}), **kwargs}


def frames_to(curve: list[tuple[int, int, float]], threshold: float) -> int | None:
    """The first env frame where the 100-episode mean (over a full window) reached `threshold`, or None."""
    return next((f for f, epi, v in curve if epi >= 100 and v >= threshold), None)


def plot(results: list[dict[str, Any]], frames: int, threshold: float, out: Path, title: str) -> None:
    """Mean over seeds of each critic's 100-episode mean return against env frames, with a min..max band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    full = [[c for c in r["curve"] if c[1] >= 100] or r["curve"] for r in results]  # from the first full window
    grid = np.linspace(max(c[0][0] for c in full), frames, 200)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for critic, color in (("independent", "tab:blue"), ("central", "tab:red")):
        runs = [c for r, c in zip(results, full) if r["critic"] == critic]
        ys = np.array([np.interp(grid, [p[0] for p in c], [p[2] for p in c]) for c in runs])
        ax.plot(grid, ys.mean(axis=0), color=color, label=f'{critic} critic ({len(runs)} seeds)')
        ax.fill_between(grid, ys.min(axis=0), ys.max(axis=0), color=color, alpha=0.2)
    ax.axhline(threshold, color="gray", linestyle=":", label=f"threshold {threshold:g}")
    ax.set_xlabel("env frames (body-steps)")
    ax.set_ylabel("team return, 100-episode mean")
    ax.set_xlim(0, frames)
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def value_at(curve: list[tuple[int, int, float]], frame: int) -> float:
    """The 100-episode mean return at the last episode end at or before `frame`."""
    return next((v for f, _, v in reversed(curve) if f <= frame), curve[0][2])


def mean_std(xs: list[float]) -> str:
    """'mean ± std' over seeds (population std)."""
    return f"{statistics.mean(xs):.2f} ± {statistics.pstdev(xs) if len(xs) > 1 else 0.0:.2f}"


def report(results: list[dict[str, Any]], frames: int, threshold: float, at: int) -> None:
    """Per critic and seed: the final team return, the return at `at` frames, frames to threshold, wall time;
    then mean ± std over seeds."""
    print(f"{'critic':<12} {'seed':>4} {'final team return':>18} {f'return at {at}':>18} "
          f"{'frames to threshold':>20} {'wall s':>7}")
    for critic in SPECS:
        runs = [r for r in results if r["critic"] == critic]
        finals = [r["curve"][-1][2] for r in runs]
        early = [value_at(r["curve"], at) for r in runs]
        reached = [frames_to(r["curve"], threshold) for r in runs]
        for r, final, mid, hit in zip(runs, finals, early, reached):
            print(f"{critic:<12} {r['seed']:>4} {final:>18.2f} {mid:>18.2f} "
                  f"{hit if hit is not None else 'not reached':>20} {r['wall']:>7.0f}")
        hits = [float(h) for h in reached if h is not None]
        mean_hit = (f"{statistics.mean(hits):.0f} ± {statistics.pstdev(hits):.0f} ({len(hits)}/{len(runs)})"
                    if hits else "not reached")
        walls = [r["wall"] for r in runs]
        print(f"{critic:<12} {'mean':>4} {mean_std(finals):>18} {mean_std(early):>18} {mean_hit:>20} "
              f"{statistics.mean(walls):>7.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_200_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--threshold", type=float, default=-80.0)
    parser.add_argument("--at", type=int, default=300_000, help="also report the return at this many frames")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--kwargs", type=json.loads, default={}, help="spread kwargs for both specs (JSON)")
    parser.add_argument("--out", type=Path, default=ROOT / "data" / "central_critic.png")
    parser.add_argument("--curves", type=Path, help="report and plot the curves JSON of an earlier run; no training")
    args = parser.parse_args()
    if args.curves is not None:
        saved = json.loads(args.curves.read_text())
        results, args.frames, args.kwargs = saved["runs"], saved["frames"], saved["kwargs"]
    else:
        jobs = [(critic, seed, args.frames, args.kwargs) for critic in SPECS for seed in args.seeds]
        with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
            results = list(pool.map(run, *zip(*jobs)))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps({"frames": args.frames, "kwargs": args.kwargs,
                                                              "threshold": args.threshold, "runs": results}))
    env_kwargs = json.dumps(setting(args.kwargs))
    print(f"spread {env_kwargs} | PPO, one agent owning every body | {args.frames} env frames | threshold "
          f"{args.threshold:g}")
    report(results, args.frames, args.threshold, args.at)
    plot(results, args.frames, args.threshold, args.out,
         f"PPO on spread {env_kwargs}:\ncentral vs independent critic, same frames and seeds")
    print(f"plot: {args.out}" + ("" if args.curves else f" (curves: {args.out.with_suffix('.json')})"))


if __name__ == "__main__":
    main()
