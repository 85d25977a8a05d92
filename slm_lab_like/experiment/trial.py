"""A trial: `meta.max_session` sessions of one spec with distinct, recorded seeds, in parallel processes."""
from __future__ import annotations

import logging
import math
import multiprocessing as mp
import multiprocessing.connection
import os
import secrets
import threading
from concurrent.futures import Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from slm_lab_like.analysis.atomic import write_json
from slm_lab_like.logs import configure_logging
from slm_lab_like.analysis.results import SessionResult
from slm_lab_like.experiment.interrupt import Interrupted, SessionInterrupted, terminate_as_interrupt, worker_init
from slm_lab_like.experiment.outdir import new_out_dir
from slm_lab_like.experiment.failures import SessionFailed, joined_failure
from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.schema import Spec
from slm_lab_like.spec.validate import to_plain

log = logging.getLogger("slm_lab_like")


@dataclass
class TrialResult:
    """The sessions of a trial and where their results were written."""

    spec: Spec
    sessions: list[SessionResult]
    out_dir: Path | None

    def summary(self) -> dict:
        """Per agent-env pair: the mean and spread over sessions of the final 100-episode mean return."""
        pairs = sorted({(c[0], c[1]) for c in self.sessions[0].metrics})
        out = []
        for a, e in pairs:
            values = [s.pair_mean_return(a, e) for s in self.sessions]
            finite = [v for v in values if not math.isnan(v)]
            out.append({"agent": self.spec.agent[a].name, "env": self.spec.env[e].name, "coord": [a, e],
                        "mean_return_100": float(np.mean(finite)) if finite else math.nan,
                        "std": float(np.std(finite)) if finite else math.nan, "per_session": values})
        placement = {"nodes": [s.nodes for s in self.sessions]} if any(s.nodes for s in self.sessions) else {}
        return {"spec": self.spec.name, "seeds": [s.seed for s in self.sessions],
                "wall_time": [round(s.wall_time, 3) for s in self.sessions], "pairs": out, **placement}


def session_seeds(spec: Spec) -> list[int]:
    """One distinct seed per session: meta.random_seed + index, or fresh entropy when it is unset."""
    base = spec.meta.random_seed if spec.meta.random_seed is not None else secrets.randbelow(2**31 - 2**16)
    return [base + i for i in range(spec.meta.max_session)]


def _run_session(spec: Spec, index: int, seed: int, out_dir: Path | None, resume: bool = False) -> SessionResult:
    return Session(spec, index, seed, out_dir, resume=resume).run()


def run_sessions(spec: Spec, jobs: list[tuple[int, int, Path | None, bool]]) -> list[SessionResult]:
    """Run sessions given as (index, seed, out_dir, resume), in worker processes when there are several, or as Ray
    tasks over a cluster with meta.ray.address (`experiment/ray_sessions.py`). Interrupted (Ctrl-C, SIGTERM) when
    asked to stop: the running sessions checkpoint and stop, the rest never start; the sessions that finished keep
    their results."""
    if spec.meta.ray.address is not None:
        from slm_lab_like.experiment.ray_sessions import run_sessions_on_ray

        return run_sessions_on_ray(spec, jobs)
    with terminate_as_interrupt():
        if len(jobs) == 1:
            try:
                return [_run_session(spec, *jobs[0])]
            except SessionInterrupted as err:
                raise Interrupted(str(err)) from None
        stop = pool_context().Event()
        futures: list[Future] = []
        with session_pool(len(jobs), logging.getLogger("slm_lab_like").level, stop) as pool:
            try:
                for job in jobs:
                    futures.append(pool.submit(_run_session, spec, *job))
                wait(futures)
            except KeyboardInterrupt:
                stop_workers(stop, futures)
            stopped = _stopped(jobs, futures)
            if stopped:
                raise Interrupted("; ".join(stopped))
            failed = [e for e in (f.exception() for f in futures) if isinstance(e, SessionFailed)]
            if failed:
                raise joined_failure(failed)
            return [f.result() for f in futures]


def _stopped(jobs: list[tuple[int, int, Path | None, bool]], futures: list[Future]) -> list[str]:
    """What each session that did not finish says: stopped where (with its checkpoint), or not started."""
    said = []
    for i, job in enumerate(jobs):
        if i >= len(futures) or futures[i].cancelled():
            said.append(f"session {job[0]} not started")
        elif isinstance(futures[i].exception(), SessionInterrupted):
            said.append(str(futures[i].exception()))
    return said


def stop_workers(stop: Any, futures: Iterable[Future]) -> None:
    """On a signal: ask the running sessions to stop at their next tick (`stop`, the pool's event), cancel those not
    started, and wait for the rest (a second signal meanwhile propagates: the sessions still stop, on the event)."""
    stop.set()
    futures = list(futures)
    for f in futures:
        f.cancel()
    wait(futures)


def pool_context() -> Any:
    """Where session workers come from: a fork server that imported the session's modules once
    (`experiment/forkserver.py`; Linux, macOS), so a worker starts in milliseconds instead of importing torch anew;
    elsewhere fresh spawned interpreters. Neither forks the lab's own process (its threads, a CUDA context). Events
    shared with the workers come from the same context."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["slm_lab_like.experiment.forkserver"])  # read when the first pool starts the server
    return ctx


def session_pool(jobs: int, level: int, stop: Any) -> ProcessPoolExecutor:
    """Worker processes for `jobs` sessions (at most one per core), logging at `level`, whose sessions stop (with a
    checkpoint) once `stop` (an Event of pool_context()) is set."""
    workers = min(jobs, os.cpu_count() or 1)
    return ProcessPoolExecutor(workers, mp_context=pool_context(), initializer=_worker_init,
                               initargs=(level, stop, max(1, (os.cpu_count() or 1) // workers)))


def _worker_init(level: int, stop: Any, torch_threads: int) -> None:
    """Logging and stopping as the lab's process has them, and torch's threads shared out over the workers: torch
    takes every core in each process by default, and parallel sessions then spin against each other (a user's
    algorithm that never sets them ran 25 times slower in 3 sessions on 2 cores). A net's `torch_threads` still sets
    its own. (multiprocessing hands each worker the lab's module path and directory as they are at its start.)"""
    import torch

    configure_logging(level)
    worker_init(stop)
    torch.set_num_threads(torch_threads)
    threading.Thread(target=_exit_with_lab, name="exit-with-lab", daemon=True).start()


def _exit_with_lab() -> None:
    """End this worker as soon as the lab's process is gone (SIGKILL, a crash): its session would otherwise run on,
    orphaned, writing into the run's directory beside a `resume` of it. (A fork server's worker outlives the lab
    otherwise: its parent is the server, which waits for it.) multiprocessing's parent sentinel turns ready when the
    process that started this worker ends, however it ended; every file the session writes is written atomically,
    so an exit here leaves what a SIGKILL of the whole run leaves."""
    parent = mp.parent_process()
    if parent is not None:
        mp.connection.wait([parent.sentinel])
        os._exit(1)


def resume_hint(stopped: str, out_dir: Path | None) -> str:
    """What an interrupted trial kept, and how to go on with it."""
    if out_dir is None:
        return f"{stopped}; nothing was written (no output directory)"
    return f"{stopped}; go on with: run_lab.py resume {out_dir}"


def write_trial(result: TrialResult) -> None:
    """The trial's summary JSON and returns plot in its directory."""
    from slm_lab_like.analysis.plots import trial_plot

    assert result.out_dir is not None
    write_json(result.out_dir / "trial.json", result.summary())
    trial_plot(result.sessions, result.out_dir / "trial_returns.png")


def run_trial(spec: Spec, out_root: Path | str | None = "data", mode: str = "train",
              address_key: str = "meta.ray.address") -> TrialResult:
    """Run every session of the trial (in worker processes when there are several, or on Ray with meta.ray.address)
    and save the results; `address_key` names where the Ray address came from, for its one-line errors."""
    if spec.meta.ray.address is None:
        return _run_trial(spec, out_root, mode)
    from slm_lab_like.experiment.ray_address import check_ray, judge_asks
    from slm_lab_like.experiment.ray_sessions import ray_connection

    check_ray(spec.meta.ray, address_key, judge_asks(spec))
    with ray_connection(spec.meta.ray, address_key):  # joined before the results directory: a run Ray refuses leaves none
        return _run_trial(spec, out_root, mode)


def _run_trial(spec: Spec, out_root: Path | str | None, mode: str) -> TrialResult:
    seeds = session_seeds(spec)
    out_dir = new_out_dir(Path(out_root), spec.name) if out_root is not None else None
    if out_dir is not None:
        write_json(out_dir / "spec.json", {"mode": mode, "seeds": seeds, "spec": to_plain(spec)})
        log.info("%s: %d session(s), seeds %s, writing to %s", spec.name, len(seeds), seeds, out_dir)
    dirs = [out_dir / f"session_{i}" if out_dir is not None else None for i in range(len(seeds))]
    try:
        sessions = run_sessions(spec, [(i, s, d, False) for i, (s, d) in enumerate(zip(seeds, dirs))])
    except Interrupted as stopped:
        raise Interrupted(resume_hint(str(stopped), out_dir)) from None
    result = TrialResult(spec, sessions, out_dir)
    if out_dir is not None:
        write_trial(result)
    return result
