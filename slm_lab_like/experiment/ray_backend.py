"""The Ray Tune backend of a search: one Tune trial per lab trial, scheduled by Ray on this machine or a cluster.

The lab plans the trials (the same variables and seeds as the local pool); Tune runs them through
`tune.Tuner` over the trial indices, each with `meta.ray.resources_per_trial`. Inside a Tune trial the
lab trial's sessions run one after another, reporting after every progress line (each report held back
until the next, so that a trial's last report, the one that carries its record, cannot be cut short by
the scheduler): `frame` (the trial's frames so far, over its sessions) and `strength` (the mean strength
of the finished sessions and the running one). With `meta.ray.asha`, ASHA compares trials on `strength`
at `frame` milestones and stops the weak ones early; they are recorded with status "stopped" and no fitness. A finished trial writes its
trial directory where it runs and reports its record, so the driver needs no shared disk for the table
(the session files stay on the node that ran them).
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Read by Ray when it is imported: with it off, a private Ray's node, GCS and workers take 127.0.0.1 instead of the
# machine's interface address (Ray resolves even --node-ip-address 127.0.0.1 to that). A driver joining a cluster
# with --ray-address still finds its node by id, whatever address the cluster uses.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import ray  # noqa: E402
from ray import tune

from slm_lab_like.analysis.fitness import Reference
from slm_lab_like.analysis.metrics import pair_returns
from slm_lab_like.experiment.progress import SearchProgress
from slm_lab_like.experiment.trials import TrialPlan, failed_record, finish_trial, start_trial, trial_dir
from slm_lab_like.experiment.session import Session
from slm_lab_like.logs import configure_logging
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.schema import RaySpec

if TYPE_CHECKING:
    from ray.tune.experiment import Trial
    from ray.tune.schedulers import ASHAScheduler


def run_ray(plans: list[TrialPlan], out_dir: Path, mode: str, spec: RaySpec, progress: SearchProgress,
            address_key: str = "meta.ray.address") -> list[dict]:
    """Run the trials on Ray Tune (joining spec.address, else a private local Ray); return their records.
    `address_key` names where the address came from, for the one-line error when Ray cannot join it."""
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # no console tables: the search display speaks instead
    started = not ray.is_initialized()
    if started:
        _init(spec, address_key)
    try:
        check_fits(spec, ray.cluster_resources())
        trainable = tune.with_resources(
            tune.with_parameters(ray_trial, plans=plans, out_dir=str(out_dir), mode=mode),
            {"cpu": spec.resources_per_trial.cpu, "gpu": spec.resources_per_trial.gpu})
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


def _init(spec: RaySpec, address_key: str) -> None:
    """ray.init for the search; SpecError at `address_key` (its root cause, one line) when it cannot join a cluster."""
    try:
        ray.init(address=spec.address, num_cpus=None if spec.address else spec.num_cpus, include_dashboard=False,
                 log_to_driver=False, logging_level=logging.ERROR)
    except (ConnectionError, RuntimeError) as err:
        if spec.address is None:
            raise
        root: BaseException = err
        while root.__cause__ is not None:
            root = root.__cause__
        lines = [ln for ln in str(root).strip().splitlines() if ln and not ln[0].isspace()]
        text = lines[-1] if lines else type(root).__name__  # a message holding a traceback ends with its error line
        raise SpecError(address_key, f'cannot join the Ray cluster at "{spec.address}": {text}') from None


def check_fits(spec: RaySpec, total: dict[str, float]) -> None:
    """SpecError when a trial asks for more CPUs or GPUs than the whole Ray cluster has: it would wait forever."""
    where = f"the Ray cluster at {spec.address}" if spec.address else "the private local Ray"
    for key, kind in (("cpu", "CPU"), ("gpu", "GPU")):
        need, have = getattr(spec.resources_per_trial, key), total.get(kind, 0.0)
        if need > have:
            raise SpecError(f"meta.ray.resources_per_trial.{key}", f"a trial asks for {need:g} {kind}(s) and {where} "
                                                                   f"has {have:g} in all: no trial could start")


def ray_trial(config: dict, plans: list[TrialPlan], out_dir: str, mode: str) -> None:
    """The Tune trainable: run one lab trial's sessions in turn, reporting progress; report its record at the end."""
    configure_logging(logging.WARNING)
    plan = plans[config["trial"]]
    out = Path(out_dir)
    frames_done = 0
    strengths: list[float] = []
    held: list[dict] = []  # each report goes out when the next one comes, so the last is the one with the record

    def report(frame: int, wall: float, metrics: dict) -> None:
        current = running_strength(metrics, plan.refs)
        if current is not None:
            if held:
                tune.report(held.pop())
            done = strengths + [current]
            held.append({"frame": frames_done + frame, "strength": sum(done) / len(done)})

    sessions = []
    for i, seed in enumerate(start_trial(plan, out, mode)):
        path = trial_dir(out, plan.index) / f"session_{i}"
        sessions.append(Session(plan.spec, i, seed, path, on_progress=report).run())
        frames_done += sum(sessions[-1].env_frames)
        strengths.append(running_strength(sessions[-1].metrics, plan.refs) or 0.0)
    record = finish_trial(plan, sessions, out)
    tune.report({"frame": frames_done, "strength": record["strength"] or 0.0, "record": json.dumps(record)})


def running_strength(metrics: dict, refs: dict[tuple[int, int], Reference]) -> float | None:
    """Mean strength over agent-env pairs of their latest 100-episode mean return; None before any episode ends."""
    values = []
    for a, e in sorted({c[:2] for c in metrics}):
        series = pair_returns(metrics, a, e)
        if not series:
            return None
        values.append(refs[(a, e)].strength(series[-1][2]))
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
