"""Stopping a run on request: Ctrl-C (SIGINT) or SIGTERM asks every session to stop (at its next step where the
signal reached its own process, else at its next look at the clock, every few thousand frames), write a checkpoint
and end as interrupted, so `run_lab.py resume DIR` goes on from there; a
second signal stops at once. Session workers take signals only while a session runs; the lab's process asks them
to stop through the pool's stop event (a signal sent to it alone reaches no worker)."""
from __future__ import annotations

import contextlib
import signal
import threading
from types import FrameType
from typing import Any, Iterator

_pool_stop: Any = None  # in a session worker: the pool's stop event (a multiprocessing Event); None elsewhere


class SessionInterrupted(Exception):
    """A session stopped on request at `frame`, with a checkpoint there when it has a directory."""

    def __init__(self, index: int, frame: int, checkpointed: bool) -> None:
        super().__init__(index, frame, checkpointed)  # its args rebuild it when it comes back from a worker
        self.index, self.frame, self.checkpointed = index, frame, checkpointed

    def __str__(self) -> str:
        return f"session {self.index} stopped at frame {self.frame}" + (
            " with a checkpoint" if self.checkpointed else "")


class Interrupted(Exception):
    """A run stopped on request; the message says what was kept and how to go on."""


def worker_init(stop: Any) -> None:
    """Set up a session worker: idle, it ignores SIGINT and SIGTERM (a terminal's Ctrl-C reaches every process of
    the run); its sessions take them, and the pool's `stop` event, while they run."""
    use_stop_event(stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def use_stop_event(stop: Any) -> None:
    """Have the sessions of this process also stop once `stop` (anything with `is_set()`) is set: a Ray session's
    event, which its driver sets through the cluster."""
    global _pool_stop
    _pool_stop = stop


class StopRequest:
    """For its `with` block, SIGINT and SIGTERM set `requested` (a second one raises KeyboardInterrupt at once); in
    a worker the pool's stop event counts too. Only the main thread takes signals: elsewhere the event alone."""

    def __init__(self) -> None:
        self.taken = False  # a signal reached this process: a plain attribute, cheap enough to read every step
        self._saved: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        """Whether the session was asked to stop: by a signal, or by the pool's stop event (read at ticks)."""
        return self.taken or (_pool_stop is not None and _pool_stop.is_set())

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._saved[sig] = signal.signal(sig, self._take)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)

    def _take(self, signum: int, frame: FrameType | None) -> None:
        if self.taken:
            raise KeyboardInterrupt
        self.taken = True


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """In the main thread, SIGTERM raises KeyboardInterrupt for the block, as Ctrl-C does: the lab's process then
    stops its workers instead of leaving them running without it. SIGINT does so too even where the lab was started
    with it ignored (a shell's background job, nohup): `kill -INT` stops such a run in order rather than not at all."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, signal.default_int_handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
