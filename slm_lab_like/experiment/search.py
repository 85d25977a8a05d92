"""An experiment: the trials of a spec's search, run on a local process pool (default) or on Ray Tune.

Trials: every combination of the `__grid_search` variables, repeated `meta.max_trial` times, each repeat
with fresh draws of the random variables (`__choice`, `__uniform`, ...): grid size x max_trial trials, as
Ray Tune's num_samples does it. Draws come from a generator seeded by `meta.random_seed`, and every trial
runs its sessions with the same seeds (random_seed + i), so trials differ only by their variables.

Output: data/<name>_<stamp>/ holds spec.json, experiment.json (trials ranked by fitness, with their
metrics), experiment_table.csv / .md and search_<variable>.png; trial_<k>/ holds each trial's spec.json,
trial.json (the trial's summary, its metrics and each session's) and trial_returns.png, with
session_<i>/ beneath as in a plain trial.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import logging
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from pathlib import Path

from slm_lab_like.analysis.atomic import write_json
from slm_lab_like.analysis.report import plot_variables, rank, write_table
from slm_lab_like.experiment.interrupt import Interrupted, terminate_as_interrupt
from slm_lab_like.experiment.progress import SearchProgress
from slm_lab_like.analysis.results import SessionResult
from slm_lab_like.experiment.failures import SessionFailed
from slm_lab_like.experiment.session import Session
from slm_lab_like.experiment.outdir import new_out_dir
from slm_lab_like.experiment.trial import pool_context, session_pool, stop_workers
from slm_lab_like.experiment.trials import TrialPlan, failed_record, finish_trial, plan_trials, start_trial, trial_dir
from slm_lab_like.spec import search as search_vars
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.experiment.ray_address import check_ray, judge_asks

log = logging.getLogger("slm_lab_like")


@dataclass
class ExperimentResult:
    """A finished search: its trial records ranked by fitness, the printed table and where it was written."""

    name: str
    records: list[dict]
    table: str
    out_dir: Path


def run_experiment(raw: dict, name: str, out_root: Path | str = "data", backend: str | None = None,
                   address: str | None = None, mode: str = "train") -> ExperimentResult:
    """Run every trial of the spec's search on the chosen backend; write and return the ranked results.

    `backend` defaults to meta.search_backend, or "ray" when a cluster's address is given (`address`, or
    meta.ray.address: the spec's sessions run on Ray, as a plain run of it does); `address` overrides
    meta.ray.address; `mode` sets the trials' budgets as in a plain run (train, dev or test).
    """
    plans = plan_trials(raw, name, mode)
    meta = plans[0].spec.meta
    backend = backend or ("ray" if address or meta.ray.address else meta.search_backend)
    ray_spec = dataclasses.replace(meta.ray, address=address or meta.ray.address)
    address_key = "--ray-address" if address else "meta.ray.address"
    if backend == "ray":  # before the results directory: a search Ray could never run leaves nothing behind
        if importlib.util.find_spec("ray") is None:
            raise SpecError("meta.search_backend", 'Ray Tune is not installed; pip install "slm_lab_like[ray]"')
        check_ray(ray_spec, address_key, judge_asks(plans[0].spec))
    elif backend != "local":
        raise SpecError("meta.search_backend", f'expected one of "local", "ray", got "{backend}"')
    if "search" not in raw:
        log.warning("search %s: the spec has no search block; its %d trial(s) run the spec as written", name,
                    len(plans))
    variables = search_vars.parse(raw.get("search", {}))
    out_dir = new_out_dir(Path(out_root), name).resolve()
    write_json(out_dir / "spec.json", {"mode": "search", "budget_mode": mode, "backend": backend,
                                       "random_seed": meta.random_seed, "trials": len(plans),
                                       "variables": [dataclasses.asdict(v) for v in variables], "spec": raw})
    log.info("search %s: %d trial(s) x %d session(s) on %s, writing to %s", name, len(plans), meta.max_session,
             backend, out_dir)
    progress = SearchProgress(name, len(plans))
    start = time.perf_counter()
    if backend == "ray":
        from slm_lab_like.experiment.ray_backend import run_ray

        records = run_ray(plans, out_dir, mode, ray_spec, progress, address_key)
    else:
        records = run_local(plans, out_dir, mode, progress)
    records = rank(records)
    paths = [v.path for v in variables]
    table = write_table(out_dir, records, paths)
    plot_variables(out_dir, records, [(v.path, v.kind) for v in variables])
    write_json(out_dir / "experiment.json", {
        "spec": name, "backend": backend, "budget_mode": mode, "random_seed": meta.random_seed,
        "wall_time": round(time.perf_counter() - start, 3), "variables": paths, "trials": records})
    return ExperimentResult(name, records, table, out_dir)


def run_local(plans: list[TrialPlan], out_dir: Path, mode: str, progress: SearchProgress) -> list[dict]:
    """Every session of every trial as one job of one process pool (all cores busy across trials)."""
    jobs = [(plan, i, seed) for plan in plans for i, seed in enumerate(start_trial(plan, out_dir, mode))]
    level = max(logging.getLogger("slm_lab_like").level, logging.WARNING)  # the search display speaks instead
    futures: dict[Future, tuple[TrialPlan, int]] = {}
    results: dict[int, dict[int, SessionResult | BaseException]] = {p.index: {} for p in plans}
    records: list[dict] = []
    stop = pool_context().Event()
    with terminate_as_interrupt(), session_pool(len(jobs), level, stop) as pool:
        try:
            for plan, i, seed in jobs:
                d = trial_dir(out_dir, plan.index) / f"session_{i}"
                futures[pool.submit(Session(plan.spec, i, seed, d).run)] = (plan, i)
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                for fut in finished:
                    plan, i = futures[fut]
                    results[plan.index][i] = fut.exception() or fut.result()
                    if len(results[plan.index]) == plan.spec.meta.max_session:
                        records.append(_record(plan, results.pop(plan.index), out_dir))
                        progress.finished(records[-1])
                progress.started({futures[f][0].index for f in pending if f.running()})
        except KeyboardInterrupt:  # the running sessions stop at their next tick, the rest never start
            stop_workers(stop, futures)
            raise Interrupted(f"search stopped with {len(records)} of {len(plans)} trial(s) finished; their "
                              f"results are in {out_dir}") from None
    return records


def _record(plan: TrialPlan, by_index: dict[int, SessionResult | BaseException], out_dir: Path) -> dict:
    errors = [str(r) if isinstance(r, SessionFailed) else f"session {i}: {r!r}"
              for i, r in sorted(by_index.items()) if isinstance(r, BaseException)]
    if errors:
        log.error("search: trial %d failed: %s", plan.index, "; ".join(errors))
        return failed_record(plan, out_dir, "error", "; ".join(errors))
    return finish_trial(plan, [r for _, r in sorted(by_index.items()) if not isinstance(r, BaseException)], out_dir)
