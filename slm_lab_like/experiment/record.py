"""Reading back what a trial wrote: its spec and seeds, its session directories, their agents and results.

A trial directory is data/<name>_<stamp>/ (spec.json, session_<i>/); a session directory is one of its
session_<i>/. Commands that take a directory (resume, enjoy, eval) accept either.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from slm_lab_like.analysis.metrics import BodyMetrics, read_csv
from slm_lab_like.analysis.metrics import metrics_path
from slm_lab_like.experiment.checkpoint import read_checkpoint
from slm_lab_like.analysis.results import SessionResult
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.load import spec_of_run
from slm_lab_like.spec.schema import Spec


class RecordError(ValueError):
    """A directory that is not (or not in a state to be used as) a trial or session directory: one line."""


@dataclass
class TrialRecord:
    """A trial directory read back: its spec as run, the mode, the session seeds and the sessions picked."""

    dir: Path
    spec: Spec
    mode: str
    seeds: list[int]
    sessions: list[int]

    def session_dir(self, index: int) -> Path:
        return self.dir / f"session_{index}"

    def finished(self, index: int) -> bool:
        """Whether session `index` ran to its end and wrote its outputs."""
        return (self.session_dir(index) / "summary.json").exists()


def read_trial(path: str | Path, play: bool = False) -> TrialRecord:
    """The trial of a trial or session directory; with a session directory, only that session is picked. With `play`
    (eval, enjoy) its spec is read as spec_of_run reads a run's spec to play (GPU nets on the CPU without CUDA)."""
    path = Path(path)
    if not path.is_dir():
        raise RecordError(f"{path}: no such directory")
    if (path / "spec.json").exists():  # every session of the trial, those not started yet (no directory) too
        trial_dir, indices = path, []
    elif path.name.startswith("session_") and (path.parent / "spec.json").exists():
        trial_dir, indices = path.parent, [int(path.name.split("_")[1])]
    else:
        raise RecordError(f"{path}: not a trial or session directory (no spec.json)")
    record = json.loads((trial_dir / "spec.json").read_text())
    if record.get("mode") == "search" or "seeds" not in record:
        trials = sorted(p.name for p in trial_dir.glob("trial_*") if p.is_dir())
        which = f"; its trials are {', '.join(trials[:3])}{', ...' if len(trials) > 3 else ''}" if trials else ""
        raise RecordError(f"{trial_dir}: a search's directory, not a trial's{which}: point at one of them")
    seeds = [int(s) for s in record["seeds"]]
    if not indices:
        indices = list(range(len(seeds)))
    try:
        spec = spec_of_run(record["spec"], play)
    except SpecError as e:  # the run's spec no longer validates here: most often a module of the user's not on the path
        hint = ("; a run imports its modules as it did when it started: run this from the directory it ran in, or put "
                "the module on PYTHONPATH") if "cannot import module" in e.message else ""
        raise SpecError(e.path, e.message + hint, str(trial_dir / "spec.json")) from None
    return TrialRecord(trial_dir, spec, record["mode"], seeds, indices)


def agent_files(session_dir: Path, n_agents: int) -> tuple[list[Path], str]:
    """Each agent's saved state in a session: the final agent_a<A>.pt files, else those of the last
    checkpoint; with a label saying which."""
    final = [session_dir / f"agent_a{a}.pt" for a in range(n_agents)]
    if all(p.exists() for p in final):
        return final, "final"
    ckpt = read_checkpoint(session_dir)
    if ckpt is None:
        raise RecordError(f"{session_dir}: no trained agent (neither agent_a0.pt nor a checkpoint)")
    return [ckpt.path / f"agent_a{a}.pt" for a in range(n_agents)], f"checkpoint at frame {ckpt.session_frame}"


def load_result(record: TrialRecord, index: int) -> SessionResult:
    """The SessionResult of a finished session, from its summary.json and metrics CSVs."""
    from slm_lab_like.spec.coords import resolve

    spec = record.spec
    session_dir = record.session_dir(index)
    summary = json.loads((session_dir / "summary.json").read_text())
    metrics = {}
    for coord in resolve(spec.body, len(spec.agent), len(spec.env)):
        metrics[coord] = BodyMetrics.from_rows(coord, read_csv(metrics_path(session_dir, coord)))
    return SessionResult(
        spec_name=spec.name, index=index, seed=int(summary["seed"]),
        env_frames=[e["frames"] for e in summary["envs"]], env_episodes=[e["episodes"] for e in summary["envs"]],
        metrics=metrics, wall_time=float(summary.get("wall_time", math.nan)),
        agent_names=[a.name for a in spec.agent], env_names=[e.name for e in spec.env], out_dir=session_dir,
        nodes=list(summary.get("nodes", [])), env_dropped=[e.get("dropped", 0) for e in summary["envs"]])
