"""Central vs independent critics on mpe2's cooperative tasks, with the MAPPO ablations: same frames, same seeds.

Each task has two shipped specs, `spec/mpe/<task>_independent.json` (`critic: "own"`) and `<task>_central.json`
(`critic: "central"`), that differ in that key only. A variant is one of those specs with algorithm (and net) keys set on
every agent:

    independent            the independent spec as shipped (value_norm on)
    central                the central spec as shipped (critic_input "all", value_norm on)
    central_no_value_norm  central, value_norm off
    central_all_own        central, critic_input "all_own"
    central_pooled         central, critic_input "pooled"
    independent_no_value_norm
    independent_critic_optim   independent, the critic with an optimiser of its own (net.critic_optim "same":
    central_critic_optim       its own Adam and its own gradient clipping, as MAPPO's code keeps them)
    independent_value_norm     independent, value_norm on
    independent_value_norm_entropy
                           independent, value_norm on, entropy_coef 0.03 (the spec's 0.01 tripled)
    independent_value_norm_slow_actor
                           independent, value_norm on, the actor's Adam at a fifth of the spec's learning rate
                           and the critic's at the spec's (a test of why value_norm changes the actor's learning)

For each task, variant and seed it trains the spec's frames (body-steps; --frames scales them) and keeps the team
return curve: at each episode end the sum over the env's bodies of their 100-episode mean returns (the units of
MARLlib's and RLlib's `episode_reward_mean`: every agent's reward summed over the episode). A run's final team
return is the last point of its curve. The report gives, per task and variant, the mean over seeds with a
bootstrap 95% interval (10,000 resamples of the seeds), and for each variant against `independent` the relative
gain (its mean minus independent's, over |independent's|) with the interval of the difference of means. Runs go
--jobs at a time in worker processes (one core each); the curves are written to --out (JSON) as they finish (runs
already in it are kept and not run again), and --report reads such a file back without training.

    python bench/mpe_teams.py [--tasks simple_spread simple_speaker_listener simple_reference]
                              [--variants independent central] [--seeds 1 2 3 4 5] [--jobs 2] [--frames 1.0]
                              [--out data/mpe_teams.json] [--report data/mpe_teams.json] [--plot docs/mpe_teams.png]
"""
from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TASKS = ("simple_spread", "simple_speaker_listener", "simple_reference")
VARIANTS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {  # spec kind, algorithm keys, net keys
    "independent": ("independent", {}, {}),
    "independent_no_value_norm": ("independent", {"value_norm": False}, {}),
    "independent_critic_optim": ("independent", {}, {"critic_optim": "same"}),
    "independent_value_norm": ("independent", {"value_norm": True}, {}),
    "independent_value_norm_entropy": ("independent", {"value_norm": True, "entropy_coef": 0.03}, {}),
    "independent_value_norm_slow_actor": ("independent", {"value_norm": True},
                                          {"optim": {"name": "Adam", "lr": 0.00014},
                                           "critic_optim": {"name": "Adam", "lr": 0.0007}}),
    "central": ("central", {}, {}),
    "central_no_value_norm": ("central", {"value_norm": False}, {}),
    "central_all_own": ("central", {"critic_input": "all_own"}, {}),
    "central_pooled": ("central", {"critic_input": "pooled"}, {}),
    "central_critic_optim": ("central", {}, {"critic_optim": "same"}),
}


def run(task: str, variant: str, seed: int, scale: float) -> dict[str, Any]:
    """One session of a variant: its team-return curve (env frame, team 100-episode mean) and wall time."""
    from slm_lab_like.experiment.session import Session
    from slm_lab_like.spec.load import read_file, validate

    kind, keys, net_keys = VARIANTS[variant]
    (raw,) = read_file(ROOT / "spec" / "mpe" / f"{task}_{kind}.json").values()
    for agent in raw["agent"]:
        agent["algorithm"].update(keys)
        agent["net"].update(net_keys)
    raw["env"][0]["max_frame"] = int(raw["env"][0]["max_frame"] * scale)
    raw["meta"] = {**raw.get("meta", {}), "log_frequency": 10**9, "max_session": 1}
    start = time.perf_counter()
    result = Session(validate(raw, f"{task}_{variant}"), seed=seed).run()
    bodies = [result.metrics[c].rows for c in sorted(result.metrics)]
    curve = [(rows[0]["env_frame"], sum(r["mean_return_100"] for r in rows)) for rows in zip(*bodies)]
    return {"task": task, "variant": variant, "seed": seed, "wall": time.perf_counter() - start, "curve": curve}


def bootstrap(xs: list[float], ys: list[float] | None = None, n: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """The 95% bootstrap interval of the mean of xs (or of mean(xs) - mean(ys)), resampling seeds."""
    rng = np.random.default_rng(seed)
    a = np.asarray(xs)[rng.integers(0, len(xs), (n, len(xs)))].mean(axis=1)
    if ys is not None:
        a = a - np.asarray(ys)[rng.integers(0, len(ys), (n, len(ys)))].mean(axis=1)
    lo, hi = np.percentile(a, [2.5, 97.5])
    return float(lo), float(hi)


def report(runs: list[dict[str, Any]]) -> None:
    """Per task and variant: final team return, mean and 95% interval over seeds, gain over independent."""
    print(f"{'task':<24} {'variant':<26} {'seeds':>5} {'final team return':>18} {'95% interval':>18} "
          f"{'vs independent':>15} {'interval of difference':>24} {'wall s':>7}")
    for task in TASKS:
        base = [r["curve"][-1][1] for r in runs if r["task"] == task and r["variant"] == "independent"]
        for variant in VARIANTS:
            group = [r for r in runs if r["task"] == task and r["variant"] == variant]
            if not group:
                continue
            finals = [r["curve"][-1][1] for r in group]
            lo, hi = bootstrap(finals)
            gain, diff = "", ""
            if base and variant != "independent":
                gain = f"{(np.mean(finals) - np.mean(base)) / abs(np.mean(base)):+.1%}"
                dlo, dhi = bootstrap(finals, base)
                diff = f"[{dlo:+.2f}, {dhi:+.2f}]"
            print(f"{task:<24} {variant:<26} {len(group):>5} {np.mean(finals):>18.2f} {f'[{lo:.2f}, {hi:.2f}]':>18} "
                  f"{gain:>15} {diff:>24} {np.mean([r['wall'] for r in group]):>7.0f}")
        for variant in VARIANTS:  # a central variant against its independent twin (the same keys), where both ran
            twin = variant.replace("central", "independent", 1)
            if not variant.startswith("central_") or twin not in VARIANTS:
                continue
            mine = [r["curve"][-1][1] for r in runs if r["task"] == task and r["variant"] == variant]
            theirs = [r["curve"][-1][1] for r in runs if r["task"] == task and r["variant"] == twin]
            if mine and theirs:
                dlo, dhi = bootstrap(mine, theirs)
                print(f"    {task} {variant} vs {twin}: "
                      f"{(np.mean(mine) - np.mean(theirs)) / abs(np.mean(theirs)):+.1%} [{dlo:+.2f}, {dhi:+.2f}]")
        for variant in VARIANTS:
            seeds = sorted((r["seed"], round(r["curve"][-1][1], 2)) for r in runs
                           if r["task"] == task and r["variant"] == variant)
            if seeds:
                print(f"    {task} {variant}: " + ", ".join(f"seed {s} {v}" for s, v in seeds))


def plot(runs: list[dict[str, Any]], out: Path) -> None:
    """One panel per task: each variant's mean team-return curve over seeds, with a min..max band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [t for t in TASKS if any(r["task"] == t for r in runs)]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.2 * len(tasks), 3.8), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for variant in VARIANTS:
            curves = [r["curve"] for r in runs if r["task"] == task and r["variant"] == variant]
            if not curves:
                continue
            grid = np.linspace(max(c[0][0] for c in curves), min(c[-1][0] for c in curves), 200)
            ys = np.array([np.interp(grid, [p[0] for p in c], [p[1] for p in c]) for c in curves])
            line, = ax.plot(grid, ys.mean(axis=0), label=f"{variant} ({len(curves)} seeds)")
            ax.fill_between(grid, ys.min(axis=0), ys.max(axis=0), color=line.get_color(), alpha=0.15)
        ax.set_title(task, fontsize=10)
        ax.set_xlabel("env frames (body-steps)")
        ax.set_ylabel("team return, 100-episode mean")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["independent", "central"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--frames", type=float, default=1.0, help="scale of each spec's max_frame")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "data" / "mpe_teams.json")
    parser.add_argument("--report", type=Path, help="report (and plot) the runs of an earlier --out; no training")
    parser.add_argument("--plot", type=Path, help="write the curves as a PNG here")
    args = parser.parse_args()
    if args.report is not None:
        runs = json.loads(args.report.read_text())["runs"]
    else:
        runs = json.loads(args.out.read_text())["runs"] if args.out.exists() else []
        done = {(r["task"], r["variant"], r["seed"]) for r in runs}
        jobs = [(t, v, s, args.frames) for s in args.seeds for t in args.tasks for v in args.variants
                if (t, v, s) not in done]
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
            for done in as_completed([pool.submit(run, *job) for job in jobs]):
                runs.append(done.result())
                r = runs[-1]
                print(f"{r['task']} {r['variant']} seed {r['seed']}: {r['curve'][-1][1]:.2f} in {r['wall']:.0f} s",
                      flush=True)
                args.out.write_text(json.dumps({"runs": runs}))
    report(runs)
    if args.plot is not None:
        plot(runs, args.plot)


if __name__ == "__main__":
    main()
