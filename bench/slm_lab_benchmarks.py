"""SLM Lab's classic-control benchmark specs, run here unchanged, scored as SLM Lab scores them, beside its table.

    python bench/slm_lab_benchmarks.py --slm-lab PATH/TO/SLM-Lab/slm_lab/spec [--rows cartpole_ppo,...] \
        [--out data/slm_lab_bench] [--table docs/slm_lab_benchmarks.md]

Each row runs `run_lab.py SLM_LAB_FILE SPEC_NAME` (the spec's own sessions, frames and settings) and scores every
session as SLM Lab's `total_reward_ma` does: at every log checkpoint (log_frequency frames) the mean return of the
last 100 finished episodes over all envs (bodies), then the mean of the last 100 checkpoints; the trial's score is
the sessions' mean. Published figures: SLM Lab's docs/BENCHMARKS.md (v5.3, master 96be3938)."""
from __future__ import annotations

import argparse
import csv
import glob
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# (row id, env, algorithm, SLM Lab file under slm_lab/spec, spec name, SLM Lab's published total_reward_ma)
ROWS = [
    ("cartpole_ppo", "CartPole-v1", "PPO", "benchmark_arc/ppo/ppo_classic_arc.yaml", "ppo_cartpole_arc", 498.94),
    ("cartpole_a2c", "CartPole-v1", "A2C", "benchmark_arc/a2c/a2c_classic_arc.yaml", "a2c_gae_cartpole_arc", 496.68),
    ("cartpole_reinforce", "CartPole-v1", "REINFORCE", "benchmark_arc/reinforce/reinforce_arc.yaml",
     "reinforce_cartpole_arc", 483.31),
    ("cartpole_sarsa", "CartPole-v1", "SARSA", "benchmark_arc/sarsa/sarsa_arc.yaml", "sarsa_boltzmann_cartpole_arc",
     430.95),
    ("cartpole_ddqn_per", "CartPole-v1", "DDQN+PER", "benchmark_arc/dqn/dqn_classic_arc.yaml",
     "ddqn_per_boltzmann_cartpole_arc", 451.51),
    ("cartpole_dqn", "CartPole-v1", "DQN", "benchmark_arc/dqn/dqn_classic_arc.yaml", "dqn_boltzmann_cartpole_arc",
     239.94),
    ("acrobot_ppo", "Acrobot-v1", "PPO", "benchmark_arc/ppo/ppo_classic_arc.yaml", "ppo_acrobot_arc", -81.28),
    ("acrobot_a2c", "Acrobot-v1", "A2C", "benchmark_arc/a2c/a2c_classic_arc.yaml", "a2c_gae_acrobot_arc", -83.99),
    ("acrobot_dqn", "Acrobot-v1", "DQN", "benchmark_arc/dqn/dqn_classic_arc.yaml", "dqn_boltzmann_acrobot_arc",
     -94.17),
    ("acrobot_ddqn_per", "Acrobot-v1", "DDQN+PER", "benchmark_arc/dqn/dqn_classic_arc.yaml", "ddqn_per_acrobot_arc",
     -83.92),
    ("acrobot_sac", "Acrobot-v1", "SAC", "benchmark_arc/sac/sac_classic_arc.yaml", "sac_acrobot_arc", -92.60),
    ("pendulum_ppo", "Pendulum-v1", "PPO", "benchmark_arc/ppo/ppo_classic_arc.yaml", "ppo_pendulum_arc", -174.87),
    ("pendulum_sac", "Pendulum-v1", "SAC", "benchmark_arc/sac/sac_classic_arc.yaml", "sac_pendulum_arc", -150.97),
    ("cartpole_ppo_v4", "CartPole-v1", "PPO (v4 JSON)", "benchmark/ppo/ppo_cartpole.json", "ppo_cartpole", 498.94),
    ("cartpole_dqn_v4", "CartPole-v1", "DQN (v4 JSON)", "benchmark/dqn/dqn_cartpole.json", "dqn_boltzmann_cartpole",
     239.94),
]
WINDOW = 100  # SLM Lab's PLOT_MA_WINDOW: episodes per checkpoint value, checkpoints per score


def session_score(session_dir: Path, log_frequency: int, max_frame: int) -> float:
    """SLM Lab's total_reward_ma of one session from its per-body episode CSVs."""
    episodes: list[tuple[int, float]] = []
    for path in glob.glob(str(session_dir / "metrics_a0_e0_b*.csv")):
        with open(path) as f:
            episodes += [(int(r["env_frame"]), float(r["return"])) for r in csv.DictReader(f)]
    episodes.sort()
    points = []
    i = 0
    for frame in range(log_frequency, max_frame + 1, log_frequency):
        while i < len(episodes) and episodes[i][0] <= frame:
            i += 1
        if i:
            points.append(statistics.fmean(r for _, r in episodes[max(0, i - WINDOW):i]))
    return statistics.fmean(points[-WINDOW:]) if points else float("nan")


def run_row(spec_root: Path, row: tuple, out: Path, sessions: int | None) -> dict:
    key, env, algo, rel, name, published = row
    started = time.monotonic()
    fewer = [] if sessions is None else ["--set", f"meta.max_session={sessions}"]
    proc = subprocess.run([sys.executable, str(ROOT / "run_lab.py"), str(spec_root / rel), name, "--out", str(out),
                           "-q", *fewer], capture_output=True, text=True)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        return {"row": key, "env": env, "algorithm": algo, "spec": name, "published": published,
                "error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    trial = Path(proc.stdout.strip().splitlines()[-1].removeprefix("results: "))
    plain = json.loads((trial / "spec.json").read_text())["spec"]
    log_frequency, max_frame = plain["meta"]["log_frequency"], plain["env"][0]["max_frame"]
    scores = [session_score(d, log_frequency, max_frame) for d in sorted(trial.glob("session_*"))]
    mean = statistics.fmean(scores)
    ok = mean >= published or min(scores) <= published <= max(scores)
    return {"row": key, "env": env, "algorithm": algo, "spec": name, "file": rel, "published": published,
            "sessions": scores, "mean": mean, "std": statistics.pstdev(scores), "wall_s": round(wall, 1),
            "frames": max_frame, "ok": ok, "trial": str(trial)}


def table(results: list[dict]) -> str:
    lines = ["| env | algorithm | SLM Lab spec | SLM Lab | here (mean ± std of sessions) | sessions | wall-clock | "
             "at or within spread |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['env']} | {r['algorithm']} | {r['spec']} | {r['published']:.2f} | error: "
                         f"{r['error']} | | | no |")
            continue
        sessions = ", ".join(f"{s:.1f}" for s in r["sessions"]) + ("" if len(r["sessions"]) >= 4 else
                                                                   f" ({len(r['sessions'])} of the spec's 4)")
        lines.append(f"| {r['env']} | {r['algorithm']} | {r['spec']} | {r['published']:.2f} | {r['mean']:.2f} ± "
                     f"{r['std']:.2f} | {sessions} | {r['wall_s'] / 60:.1f} min | {'yes' if r['ok'] else 'no'} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--slm-lab", required=True, type=Path, help="SLM Lab's slm_lab/spec directory")
    p.add_argument("--rows", default="", help="comma-separated row ids (default: all)")
    p.add_argument("--out", default="data/slm_lab_bench", type=Path)
    p.add_argument("--results", default=None, type=Path, help="JSON lines file the rows are appended to")
    p.add_argument("--sessions", default=None, type=int, help="sessions per row instead of the spec's own (for time)")
    args = p.parse_args()
    by_id = {r[0]: r for r in ROWS}
    chosen = [by_id[key] for key in args.rows.split(",")] if args.rows else ROWS  # in the order given
    results = []
    for row in chosen:
        result = run_row(args.slm_lab, row, args.out, args.sessions)
        results.append(result)
        print(json.dumps(result), flush=True)
        if args.results:
            with open(args.results, "a") as f:
                f.write(json.dumps(result) + "\n")
    print(table(results), end="")
    return 0 if all(r.get("ok") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
