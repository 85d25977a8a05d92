"""The Ray Tune backend of a search: one Tune trial per lab trial, scheduled by Ray on this machine or a cluster.

The lab plans the trials (the same variables and seeds as the local pool); Tune runs them through
`tune.Tuner` over the trial indices. A Tune trial only coordinates (it reserves a hundredth of a CPU): its sessions run as Ray
tasks spread over the cluster, each with `meta.ray.resources_per_session` (`experiment/ray_sessions.py`, as a
plain trial's do with meta.ray.address), so Ray fills the cluster with the sessions of every trial. The trial reports
after every progress line of a session (each report held back until the next, so that a trial's last report, the
one that carries its record, cannot be cut short by the scheduler): `frame` (the trial's frames so far, over its
sessions) and `strength` (the mean over its sessions of their latest strength). With `meta.ray.asha`, ASHA compares trials on `strength`
at `frame` milestones and stops the weak ones early; they are recorded with status "stopped" and no fitness. A finished trial writes its
trial directory where it runs and reports its record, so the driver needs no shared disk for the table
(the sessions' files come to the directory of the node that runs the trial).
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Read by Ray when it is imported: with it off, a private Ray's node, GCS and workers take 127.0.0.1 instead of the
# machine's interface address (Ray resolves even --node-ip-address 127.0.0.1 to that). A driver joining a cluster
# with --ray-address still finds its node by id, whatever address the cluster uses.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import ray  # noqa: E402
from ray import tune

from slm_lab_like.analysis.fitness import Reference
from slm_lab_like.experiment.progress import SearchProgress
from slm_lab_like.experiment.ray_address import judge_asks
from slm_lab_like.experiment.ray_sessions import PairMeans, check_fits, join_ray, run_sessions_on_ray
from slm_lab_like.experiment.trials import TrialPlan, failed_record, finish_trial, start_trial, trial_dir
from slm_lab_like.logs import configure_logging
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.schema import RaySpec

COORDINATOR_CPU = 0.01  # what a Tune trial, which only waits on its session tasks, reserves (Tune refuses none)

if TYPE_CHECKING:
    from ray.tune.experiment import Trial
    from ray.tune.schedulers import ASHAScheduler


def run_ray(plans: list[TrialPlan], out_dir: Path, mode: str, spec: RaySpec, progress: SearchProgress,
            address_key: str = "meta.ray.address") -> list[dict]:
    """Run the trials on Ray Tune (joining spec.address, else a private local Ray); return their records.
    `address_key` names where the address came from, for the one-line error when Ray cannot join it."""
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # no console tables: the search display speaks instead
    started = join_ray(replace(spec, address=spec.address or "local"), address_key)
    try:
        check_fits(spec, ray.cluster_resources(), judge_asks(plans[0].spec))
        trainable = tune.with_resources(
            tune.with_parameters(ray_trial, plans=plans, out_dir=str(out_dir), mode=mode), {"cpu": COORDINATOR_CPU})
        tuner = tune.Tuner(
            trainable, param_space={"trial": tune.grid_search([p.index for p in plans])},
            tune_config=tune.TuneConfig(scheduler=_asha(plans, spec), reuse_actors=True),
            run_config=tune.RunConfig(name="tune", storage_path=str(out_dir / "ray"), verbose=0,
                                      callbacks=[_Display(plans, out_dir, progress)]))
        grid = tuner.fit()
        return [_record(plans[r.config["trial"]], r.metrics or {}, out_dir, r.error)
                for r in grid]
    finally:
        if started:
            ray.shutdown()


def ray_trial(config: dict, plans: list[TrialPlan], out_dir: str, mode: str) -> None:
    """The Tune trainable: run one lab trial's sessions as Ray tasks, reporting progress; report its record at the
    end."""
    configure_logging(logging.WARNING)
    plan = plans[config["trial"]]
    out = Path(out_dir)
    frames: dict[int, int] = {}
    strengths: dict[int, float] = {}
    held: list[dict] = []  # each report goes out when the next one comes, so the last is the one with the record

    def report(index: int, frame: int, means: PairMeans) -> None:
        frames[index] = frame
        current = running_strength(means, plan.refs)
        if current is None:
            return
        strengths[index] = current
        if held:
            tune.report(held.pop())
        held.append({"frame": sum(frames.values()), "strength": sum(strengths.values()) / len(strengths)})

    seeds = start_trial(plan, out, mode)
    jobs = [(i, seed, trial_dir(out, plan.index) / f"session_{i}", False) for i, seed in enumerate(seeds)]
    sessions = run_sessions_on_ray(plan.spec, jobs, on_progress=report)
    record = finish_trial(plan, sessions, out)
    tune.report({"frame": sum(sum(s.env_frames) for s in sessions), "strength": record["strength"] or 0.0,
                 "record": json.dumps(record)})


def running_strength(means: PairMeans, refs: dict[tuple[int, int], Reference]) -> float | None:
    """Mean strength over agent-env pairs of their latest 100-episode mean return; None before every pair has an
    episode."""
    if any(pair not in means for pair in refs):
        return None
    values = [refs[pair].strength(means[pair]) for pair in sorted(refs)]
    return sum(values) / len(values) if values else None


def _asha(plans: list[TrialPlan], spec: RaySpec) -> ASHAScheduler | None:
    """ASHA on strength at frame milestones, when asked for; max_frame defaults to the trial's frame budget."""
    if spec.asha is None:
        return None
    from ray.tune.schedulers import ASHAScheduler

    budget = spec.asha.max_frame
    if budget is None:
        if any(e.max_frame is None for p in plans for e in p.spec.env):
            raise SpecError("meta.ray.asha.max_frame", "required when an env's budget is max_episode")
        budget = max(sum(e.max_frame or 0 for e in p.spec.env) * p.spec.meta.max_session for p in plans)
    return ASHAScheduler(time_attr="frame", metric="strength", mode="max", max_t=budget,
                         grace_period=min(spec.asha.grace_frame, budget), reduction_factor=spec.asha.reduction_factor)


def _record(plan: TrialPlan, metrics: dict, out_dir: Path, error: object = None) -> dict:
    """A lab record from a Tune trial's last result: the trial's own record, or why it has none."""
    if "record" in metrics:
        return json.loads(metrics["record"])
    if error is not None:
        return failed_record(plan, out_dir, "error", repr(error))
    return failed_record(plan, out_dir, "stopped", "stopped early by ASHA", frames=metrics.get("frame"),
                         strength=metrics.get("strength"))


class _Display(tune.Callback):
    """Feeds Tune's trial events to the search progress display."""

    def __init__(self, plans: list[TrialPlan], out_dir: Path, progress: SearchProgress) -> None:
        self.plans = plans
        self.out_dir = out_dir
        self.progress = progress

    def on_trial_start(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self.progress.started({trial.config["trial"]})

    def on_trial_complete(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self.progress.finished(_record(self.plans[trial.config["trial"]], trial.last_result or {}, self.out_dir))

    def on_trial_error(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self.progress.finished(_record(self.plans[trial.config["trial"]], {}, self.out_dir, "trial raised"))
