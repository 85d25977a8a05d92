"""A search's trials: their plans (variables and validated specs), directories and records, shared by the local
pool and the Ray Tune backend."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slm_lab_like.analysis.atomic import write_json
from slm_lab_like.analysis.fitness import Reference, session_metrics, trial_metrics
from slm_lab_like.analysis.results import SessionResult
from slm_lab_like.experiment.baseline import references
from slm_lab_like.experiment.telemetry import write_hparams
from slm_lab_like.experiment.trial import TrialResult, session_seeds
from slm_lab_like.spec import search as search_vars
from slm_lab_like.spec.load import validate, with_mode
from slm_lab_like.spec.schema import Spec
from slm_lab_like.spec.validate import to_plain


@dataclass
class TrialPlan:
    """One trial of a search: its index, the value of each search variable, and the resulting spec."""

    index: int
    values: dict[str, Any]
    spec: Spec
    refs: dict[tuple[int, int], Reference]


def plan_trials(raw: dict, name: str, mode: str = "train") -> list[TrialPlan]:
    """Validated specs of every trial: grid combinations x meta.max_trial draws of the random variables."""
    base = validate(raw, name)
    variables = search_vars.parse(raw.get("search", {}))
    seed = session_seeds(base)[0]  # meta.random_seed, or fresh entropy drawn once for every trial
    plain = {k: v for k, v in raw.items() if k != "search"}
    plain["meta"] = {**plain.get("meta", {}), "random_seed": seed}
    rng = np.random.default_rng(seed)
    randoms = [v for v in variables if v.kind != "grid_search"]
    plans: list[TrialPlan] = []
    for _ in range(base.meta.max_trial):
        for combo in search_vars.grid(variables):
            values = {**combo, **{v.path: v.sample(rng) for v in randoms}}
            spec = with_mode(validate(search_vars.apply(plain, values), name), mode)
            plans.append(TrialPlan(len(plans), values, spec, references(spec)))
    return plans


def trial_dir(out_dir: Path, index: int) -> Path:
    """Where trial `index` of an experiment writes: <experiment dir>/trial_<index>."""
    return Path(out_dir) / f"trial_{index}"


def start_trial(plan: TrialPlan, out_dir: Path, mode: str) -> list[int]:
    """Write the trial's spec.json (mode, seeds, search values, resolved spec); return its session seeds."""
    seeds = session_seeds(plan.spec)
    write_json(trial_dir(out_dir, plan.index) / "spec.json",
               {"mode": mode, "seeds": seeds, "trial": plan.index, "values": plan.values, "spec": to_plain(plan.spec)})
    return seeds


def finish_trial(plan: TrialPlan, sessions: list[SessionResult], out_dir: Path) -> dict:
    """Score a trial's sessions, write its trial.json and trial_returns.png, and return its record."""
    from slm_lab_like.analysis.plots import trial_plot

    path = trial_dir(out_dir, plan.index)
    per_session = [session_metrics(s, plan.refs) for s in sessions]
    metrics = trial_metrics(per_session)
    summary = TrialResult(plan.spec, sessions, path).summary()
    write_json(path / "trial.json", {**summary, "trial": plan.index, "values": plan.values, "metrics": metrics,
                                     "sessions": per_session})
    trial_plot(sessions, path / "trial_returns.png")
    if plan.spec.meta.tensorboard:
        write_hparams(path, plan.values, metrics)
    return {"trial": plan.index, "values": plan.values, "status": "done", **metrics,
            "frames": sum(s["frames"] for s in per_session), "dir": str(path),
            "references": references_json(plan), "sessions": per_session}


def failed_record(plan: TrialPlan, out_dir: Path, status: str, error: str, **extra: Any) -> dict:
    """The record of a trial that did not finish (an error, or stopped early by the scheduler)."""
    return {"trial": plan.index, "values": plan.values, "status": status, "fitness": None, "error": error,
            "dir": str(trial_dir(out_dir, plan.index)), "references": references_json(plan), **extra}


def references_json(plan: TrialPlan) -> list[dict]:
    """The trial's references (random return, threshold) per agent-env pair, JSON-ready."""
    return [{"coord": list(c), "random_return": r.random_return, "threshold": r.threshold}
            for c, r in sorted(plan.refs.items())]
