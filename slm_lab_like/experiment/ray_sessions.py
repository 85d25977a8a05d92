"""A trial's sessions as Ray tasks, in parallel over a Ray cluster's nodes (`meta.ray.address`, `--ray-address`).

Each session runs in a task with `meta.ray.resources_per_session`, in a directory of its node's own, and sends the
files it changed since its last progress line (`experiment/shipping.py`) to a small hub actor on the driver's node;
the driver writes them into the run's directory, so every file of the run ends up where a local run writes it and
no shared disk is assumed. A session lost with its node or worker is started again (at most
`meta.ray.max_retries` times) from the last checkpoint that reached the driver (from the start when none did),
its files sent to the new node; past that it fails in one line, as a session that raised does. Ctrl-C stops the
sessions through the hub: each writes a checkpoint where it is, which reaches the driver before it ends.
Ray's own serialisation carries the tasks' arguments and results inside the cluster the user started; nothing
here reads pickle from a socket or file of anyone else.
"""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # see ray_backend: a private Ray on 127.0.0.1

import ray  # noqa: E402
from ray.exceptions import RayError, RayTaskError  # noqa: E402

from slm_lab_like.analysis.atomic import write_json  # noqa: E402
from slm_lab_like.analysis.metrics import BodyMetrics, pair_returns  # noqa: E402
from slm_lab_like.analysis.results import SessionResult  # noqa: E402
from slm_lab_like.experiment import interrupt  # noqa: E402
from slm_lab_like.experiment.checkpoint import read_checkpoint  # noqa: E402
from slm_lab_like.experiment.ray_address import Ask, all_asks, judge_asks  # noqa: E402
from slm_lab_like.experiment.interrupt import Interrupted, SessionInterrupted, terminate_as_interrupt  # noqa: E402
from slm_lab_like.experiment.failures import SessionFailed, joined_failure  # noqa: E402
from slm_lab_like.experiment.session import Session  # noqa: E402
from slm_lab_like.experiment.shipping import Change, DirShipper, apply_changes, pack_dir  # noqa: E402
from slm_lab_like.logs import configure_logging  # noqa: E402
from slm_lab_like.spec.errors import SpecError  # noqa: E402
from slm_lab_like.spec.coords import Coord  # noqa: E402
from slm_lab_like.spec.schema import RaySpec, Spec  # noqa: E402

log = logging.getLogger("slm_lab_like")
STOP_POLL = 1.0  # seconds between a session's looks at the hub's stop flag
Job = tuple[int, int, "Path | None", bool]  # (session index, seed, its directory on the driver, resume)
PairMeans = dict[tuple[int, int], float]  # agent-env pair -> its latest 100-episode mean return
Progress = Callable[[int, int, PairMeans], None]  # (session index, its env frames, its pairs' means)


@ray.remote(num_cpus=0)
class Hub:
    """What the sessions send the driver (file changes, progress), held until it takes them; and its stop flag."""

    def __init__(self) -> None:
        self.items: list[tuple] = []
        self.stop = False

    def put(self, item: tuple) -> bool:
        """Keep `item`; whether the driver asked the sessions to stop."""
        self.items.append(item)
        return self.stop

    def take(self) -> list[tuple]:
        items, self.items = self.items, []
        return items

    def request_stop(self) -> None:
        self.stop = True

    def stopped(self) -> bool:
        return self.stop


def join_ray(spec: RaySpec, address_key: str = "meta.ray.address") -> bool:
    """Connect to the cluster at spec.address ("local": a private Ray of this machine's, with meta.ray.num_cpus), once;
    whether this call connected (and so should disconnect). SpecError at `address_key`, in one line (its root
    cause), when Ray cannot join it."""
    if ray.is_initialized():
        return False
    address = spec.address if spec.address != "local" else None
    try:
        ray.init(address=address, num_cpus=None if address else spec.num_cpus, include_dashboard=False,
                 log_to_driver=False, logging_level=logging.ERROR)
    except (ConnectionError, RuntimeError) as err:
        if address is None:
            raise
        root: BaseException = err
        while root.__cause__ is not None:
            root = root.__cause__
        lines = [ln for ln in str(root).strip().splitlines() if ln and not ln[0].isspace()]
        text = lines[-1] if lines else type(root).__name__  # a message holding a traceback ends with its error line
        raise SpecError(address_key, f'cannot join the Ray cluster at "{spec.address}": {text}') from None
    return True


def check_fits(spec: RaySpec, total: dict[str, float], judges: Sequence[Ask] = ()) -> None:
    """SpecError when a session or a judge (`judges`: ray_address.judge_asks) asks for more CPUs or GPUs than the
    whole Ray cluster has: it would wait forever."""
    where = f"the Ray cluster at {spec.address}" if spec.address not in (None, "local") else "the private local Ray"
    for key, who, need in all_asks(spec, judges):
        for unit, kind in (("cpu", "CPU"), ("gpu", "GPU")):
            asked, have = getattr(need, unit), total.get(kind, 0.0)
            if asked > have:
                raise SpecError(f"{key}.{unit}", f"{who} asks for {asked:g} {kind}(s) and {where} has {have:g} in all: "
                                                 "it could never start")


@contextlib.contextmanager
def ray_connection(spec: RaySpec, address_key: str = "meta.ray.address") -> Iterator[None]:
    """Connected to spec.address's cluster for the block (join_ray), and disconnected after it if it joined."""
    started = join_ray(spec, address_key)
    try:
        yield
    finally:
        if started:
            ray.shutdown()


def run_sessions_on_ray(spec: Spec, jobs: Sequence[Job], on_progress: Progress | None = None) -> list[SessionResult]:
    """Run the sessions `jobs` as Ray tasks on spec.meta.ray's cluster; their results, in the order of `jobs`, their
    files in their directories here. Raises SessionFailed and Interrupted as the local pool does."""
    with ray_connection(spec.meta.ray):
        check_fits(spec.meta.ray, ray.cluster_resources(), judge_asks(spec))
        return _Runner(spec, jobs, on_progress).run()


@dataclass
class _Attempt:
    """One session's current task and what the driver knows of it."""

    index: int
    seed: int
    out_dir: Path | None
    resume: bool
    number: int = 0  # 0 for the first task, k for the k-th retry
    nodes: dict[int, str] = field(default_factory=dict)  # attempt number -> the node its task ran on
    ref: Any = None


class _Runner:
    """The driver's side: start the tasks, write what they send, retry the lost ones, gather the results."""

    def __init__(self, spec: Spec, jobs: Sequence[Job], on_progress: Progress | None) -> None:
        self.spec = spec
        self.on_progress = on_progress
        self.attempts = [_Attempt(i, seed, Path(d) if d is not None else None, resume) for i, seed, d, resume in jobs]
        self.by_index = {a.index: a for a in self.attempts}  # a resume runs some sessions of a trial, not all
        self.hub = Hub.options(scheduling_strategy=_here()).remote()  # type: ignore[attr-defined]
        self.level = logging.getLogger("slm_lab_like").level

    def run(self) -> list[SessionResult]:
        results: dict[int, SessionResult] = {}
        errors: dict[int, BaseException] = {}
        pending = {self._start(a): a for a in self.attempts}
        with terminate_as_interrupt():
            try:
                while pending:
                    ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
                    self._drain()
                    for ref in ready:
                        attempt = pending.pop(ref)
                        outcome = self._outcome(attempt, ref)
                        if isinstance(outcome, SessionResult):
                            results[attempt.index] = outcome
                        elif outcome is None:  # lost, and started again
                            pending[attempt.ref] = attempt
                        else:
                            errors[attempt.index] = outcome
            except KeyboardInterrupt:
                self._stop(pending, results, errors)
        self._drain()
        return self._finish(results, errors)

    def _start(self, attempt: _Attempt) -> Any:
        """Submit `attempt`'s task, with the files of its directory here when it resumes."""
        res = self.spec.meta.ray.resources_per_session
        files = pack_dir(attempt.out_dir) if attempt.resume and attempt.out_dir is not None else []
        attempt.ref = _session_task.options(
            num_cpus=res.cpu, num_gpus=res.gpu, scheduling_strategy="SPREAD").remote(  # SPREAD: over the nodes, and
            # out of a Tune trial's placement group, which would hold its child tasks to its own small bundle
            self.spec, attempt.index, attempt.seed, attempt.resume, attempt.out_dir is not None, files, self.hub,
            attempt.number, self.level)
        return attempt.ref

    def _drain(self) -> None:
        """Write the files the sessions sent, and pass their progress on (items of superseded tasks are dropped)."""
        for index, number, node, changes, frame, means in ray.get(self.hub.take.remote()):
            attempt = self.by_index[index]
            if number != attempt.number:
                continue
            if number not in attempt.nodes:
                attempt.nodes[number] = node
                log.info("%s s%d runs on Ray node %s", self.spec.name, index, node)
            if attempt.out_dir is not None and changes:
                apply_changes(attempt.out_dir, changes)
            if self.on_progress is not None and frame is not None:
                self.on_progress(index, frame, means)

    def _outcome(self, attempt: _Attempt, ref: Any, retry: bool = True) -> SessionResult | BaseException | None:
        """A finished task's result, or its error; None when the session was lost and has been started again
        (only with `retry`)."""
        try:
            result = ray.get(ref)
        except RayTaskError as err:  # the session's own error (SessionFailed, SessionInterrupted, a bug)
            return err.cause if isinstance(err.cause, BaseException) else err
        except RayError as err:  # its worker or node died, its result was lost
            return self._retry(attempt, err) if retry else err
        result.out_dir = attempt.out_dir
        result.nodes = [attempt.nodes[k] for k in sorted(attempt.nodes)]
        if attempt.out_dir is not None:
            write_json(attempt.out_dir / "summary.json", result.summary())
        return result

    def _retry(self, attempt: _Attempt, err: RayError) -> SessionFailed | None:
        """Start a lost session again from the last checkpoint here (None), or its one-line failure past
        meta.ray.max_retries."""
        why = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if attempt.number >= self.spec.meta.ray.max_retries:
            return SessionFailed(attempt.index, f"lost on Ray {attempt.number + 1} time(s), the last: {why}")
        ckpt = read_checkpoint(attempt.out_dir) if attempt.out_dir is not None else None
        attempt.resume = ckpt is not None
        if ckpt is None and attempt.out_dir is not None:
            shutil.rmtree(attempt.out_dir, ignore_errors=True)
        attempt.number += 1
        log.warning("%s s%d lost on Ray (%s); started again from %s (retry %d of %d)", self.spec.name, attempt.index,
                    why, f"its checkpoint at frame {ckpt.session_frame}" if ckpt else "the start", attempt.number,
                    self.spec.meta.ray.max_retries)
        self._start(attempt)
        return None

    def _stop(self, pending: dict[Any, _Attempt], results: dict[int, SessionResult],
              errors: dict[int, BaseException]) -> None:
        """On Ctrl-C or SIGTERM: ask every running session to checkpoint and stop, and wait for them (a second signal
        cancels them at once: their last checkpoints here stand)."""
        ray.get(self.hub.request_stop.remote())
        try:
            ray.wait(list(pending), num_returns=len(pending), timeout=None)
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref, force=True)
        self._drain()
        for ref, attempt in pending.items():
            outcome = self._outcome(attempt, ref, retry=False)
            if isinstance(outcome, SessionResult):
                results[attempt.index] = outcome
            elif isinstance(outcome, RayError) or outcome is None:  # cancelled: its last checkpoint here stands
                ckpt = read_checkpoint(attempt.out_dir) if attempt.out_dir is not None else None
                errors[attempt.index] = SessionInterrupted(attempt.index, ckpt.session_frame if ckpt else 0,
                                                           ckpt is not None)
            else:
                errors[attempt.index] = outcome
        pending.clear()

    def _finish(self, results: dict[int, SessionResult], errors: dict[int, BaseException]) -> list[SessionResult]:
        """The results in job order, or the error that ends the trial as the local pool's would."""
        stopped = [str(e) for e in errors.values() if isinstance(e, SessionInterrupted)]
        if stopped:
            raise Interrupted("; ".join(stopped))
        failed = [e for _, e in sorted(errors.items())]
        if failed:
            known = [e for e in failed if isinstance(e, SessionFailed)]
            if len(known) == len(failed):
                raise joined_failure(known)
            raise failed[0]
        return [results[a.index] for a in self.attempts]


def _here() -> Any:
    """A scheduling strategy that keeps an actor on the driver's own node (None where the driver has none here: a
    Ray Client connection)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    try:
        return NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    except Exception:  # a Ray Client driver has no node of its own
        return None


@ray.remote(max_retries=0)  # a lost session is started again by the driver, from its last checkpoint
def _session_task(spec: Spec, index: int, seed: int, resume: bool, keep_files: bool, files: list[Change], hub: Any,
                  number: int, level: int) -> SessionResult:
    """One session on whichever node Ray chose, in a directory of that node's, its changes sent to the hub."""
    import torch

    configure_logging(level)
    torch.set_num_threads(max(1, int(spec.meta.ray.resources_per_session.cpu)))
    node = ray.get_runtime_context().get_node_id()
    with tempfile.TemporaryDirectory(prefix=f"slm-session{index}-") as tmp:
        out_dir = Path(tmp) / f"session_{index}" if keep_files else None
        shipper = DirShipper(out_dir) if out_dir is not None else None
        if out_dir is not None and shipper is not None:
            out_dir.mkdir()
            apply_changes(out_dir, files)
            shipper.prime()

        def send(frame: int | None, means: PairMeans | None) -> None:
            ray.get(hub.put.remote((index, number, node, shipper.changes() if shipper else [], frame, means)))

        def progress(frame: int, wall: float, metrics: Mapping[Coord, BodyMetrics]) -> None:
            send(frame, latest_means(metrics))

        flag = _stop_flag(hub)
        try:
            return Session(spec, index, seed, out_dir, on_progress=progress, resume=resume).run()
        finally:
            flag.set()  # ends the poller
            send(None, None)  # the last files (a final checkpoint, summary, plot, error.log) before the task ends


def _stop_flag(hub: Any) -> threading.Event:
    """An event the session reads at its ticks as it reads a local pool's stop event, set when the driver asks the
    sessions to stop (polled every STOP_POLL seconds) or when the caller sets it to end the poller."""
    flag = threading.Event()
    stop = threading.Event()

    def poll() -> None:
        while not flag.wait(STOP_POLL):
            try:
                if ray.get(hub.stopped.remote()):
                    stop.set()
                    return
            except RayError:  # the driver is gone: stop, with a checkpoint
                stop.set()
                return

    interrupt.use_stop_event(stop)
    threading.Thread(target=poll, name="ray-stop-poll", daemon=True).start()
    return flag


def latest_means(metrics: Mapping[Coord, BodyMetrics]) -> PairMeans:
    """Each agent-env pair's latest 100-episode mean return (pairs without an episode yet are left out)."""
    out = {}
    for a, e in sorted({c[:2] for c in metrics}):
        series = pair_returns(metrics, a, e)
        if series:
            out[(a, e)] = series[-1][2]
    return out
