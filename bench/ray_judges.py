"""Env steps per second of an I/O-bound env (2 ms a step) with its 8 bodies over 4 judges placed by Ray, against
the same spec with 1 judge, alternating in one run on one private Ray (#31):

    python bench/ray_judges.py [--repeats 3] [--frames 8000] [--judges 4]

The spec is examples/ray_cluster/io_judges.json (a Random agent, `io_env:SlowCartPole`); each run is a whole lab
session on Ray, and its rate is the session's own (env frames / the session's wall time, as summary.json gives it).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "ray_cluster"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--frames", type=int, default=8000)
    p.add_argument("--judges", type=int, default=4)
    args = p.parse_args()
    os.chdir(EXAMPLE)  # the env's module sits beside the spec; the private Ray's workers start here too
    sys.path.insert(0, str(EXAMPLE))
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import logging

    import ray

    from slm_lab_like.experiment.trial import run_trial
    from slm_lab_like.spec.load import validate

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    raw = json.loads((EXAMPLE / "io_judges.json").read_text())["io_judges"]
    raw["env"][0]["max_frame"] = args.frames
    rates: dict[int, list[float]] = {args.judges: [], 1: []}
    with tempfile.TemporaryDirectory() as out:
        for _ in range(args.repeats):
            for judges in (args.judges, 1):
                raw["env"][0]["remote"]["judges"] = judges
                result = run_trial(validate(raw, f"io_judges_{judges}"), out)
                rates[judges].append(result.sessions[0].fps)
                print(f"{judges} judge(s): {rates[judges][-1]:.0f} env steps/s", flush=True)
    ray.shutdown()
    many, one = statistics.median(rates[args.judges]), statistics.median(rates[1])
    print(json.dumps({"judges": args.judges, "bodies": raw["body"]["num"], "fps_many": round(many, 1),
                      "fps_one": round(one, 1), "ratio": round(many / one, 2), "runs": rates}))
    print(f"{args.judges} Ray-placed judges / 1: {many / one:.2f}x env steps per second (median of {args.repeats})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
