"""One seat of a game played by a submission: a ``policy(obs)`` file in its own subprocess, reached through a judge.

The referee plays the game in its own process and asks the seat for a move (:meth:`SubmissionSeat.act`). The
submission runs as hosted evaluation runs it (``python -m slm_lab_like.remote.evaluate --run-agent FILE``): a
:class:`~slm_lab_like.remote.client.RemoteEnv` client of a single-agent judge whose env, :class:`SeatEnv`, is this
seat: its reset and step return the observations the referee hands over and pass the submission's actions back.
A submission that dies, stays silent past the move time limit or sends an action the judge's codec refuses
raises :class:`Forfeit` naming why; its process is killed, so it cannot stall anything else. Only data crosses
(msgpack headers and raw arrays): nothing from a submission is unpickled.
"""
from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import gymnasium as gym

from slm_lab_like.remote.server import JudgeServer
from slm_lab_like.remote.spawn import child_environment

POLL_S = 0.01
_STDERR_TAIL = 600
HOLD_S = 3600.0  # how long the judge's env waits for the referee's next observation


class Forfeit(Exception):
    """A seat lost its game by fault: `kind` is "crash", "timeout", "invalid_action" or "illegal_action"."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(f"{kind}: {reason}")
        self.kind = kind
        self.reason = reason


class SeatEnv(gym.Env):
    """The env the submission's client sees: observations come from the referee, actions go back to it."""

    def __init__(self, link: "SubmissionSeat") -> None:
        self.link = link
        self.observation_space = link.observation_space
        self.action_space = link.action_space

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """The seat's first observation of the game (waits for the referee to hand it over)."""
        super().reset(seed=seed)
        self.link.connected.set()
        _, obs, _, _, _ = self.link.inbox.get(timeout=HOLD_S)
        return obs, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        """Pass the action to the referee; return when the seat is to move again or its game is over."""
        self.link.outbox.put(action)
        _, obs, reward, terminated, truncated = self.link.inbox.get(timeout=HOLD_S)
        return obs, reward, terminated, truncated, {}


class SubmissionSeat:
    """A submission's subprocess and judge for one game; `act` returns its move or raises Forfeit."""

    def __init__(self, path: str, observation_space: gym.Space, action_space: gym.Space, *,
                 move_time_limit: float, startup_timeout: float = 60.0, python: str = sys.executable) -> None:
        self.path = os.path.abspath(path)
        self.observation_space = observation_space
        self.action_space = action_space
        self.move_time_limit = move_time_limit
        self.startup_timeout = startup_timeout
        self.python = python
        self.inbox: queue.Queue = queue.Queue()
        self.outbox: queue.Queue = queue.Queue()
        self.connected = threading.Event()
        self.judge: JudgeServer | None = None
        self.proc: subprocess.Popen | None = None
        self.stderr = tempfile.TemporaryFile()
        self.moved = False

    def start(self) -> None:
        """Start the judge and the submission's process (which connects and resets)."""
        self.judge = JudgeServer(lambda: SeatEnv(self), max_sessions=1, session_timeout=None)
        address = self.judge.start()
        client_timeout = self.startup_timeout + 10 * self.move_time_limit + 30
        self.proc = subprocess.Popen(
            [self.python, "-m", "slm_lab_like.remote.evaluate", "--run-agent", self.path, "--address", address,
             "--episodes", "1", "--timeout", str(client_timeout)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr, env=child_environment())

    def act(self, obs: Any) -> Any:
        """The submission's action for `obs`; Forfeit when it crashes, overruns the move time limit or is refused."""
        if self.proc is None:
            self.start()
        self.inbox.put(("step", obs, 0.0, False, False))
        if not self.moved:
            self._wait(self.connected.is_set, self.startup_timeout, "did not connect and reset within")
            self.moved = True
        box: list[Any] = []

        def got() -> bool:
            try:
                box.append(self.outbox.get_nowait())
            except queue.Empty:
                return False
            return True

        self._wait(got, self.move_time_limit, "no move within the move time limit of")
        return box[0]

    def _wait(self, ready: Any, limit: float, what: str) -> None:
        """Poll `ready()` until it holds; Forfeit if the process ends first or `limit` seconds pass."""
        assert self.proc is not None
        deadline = time.monotonic() + limit
        while not ready():
            if self.proc.poll() is not None:
                raise self._crash()
            if time.monotonic() > deadline:
                raise Forfeit("timeout", f"{what} {limit:g}s")
            time.sleep(POLL_S)

    def _crash(self) -> Forfeit:
        """The Forfeit of a process that ended: an invalid action when the judge refused one, else a crash."""
        assert self.proc is not None
        self.stderr.seek(0)
        tail = self.stderr.read().decode("utf-8", "replace").strip()[-_STDERR_TAIL:]
        last = tail.splitlines()[-1] if tail else ""
        if "invalid_action" in tail:
            return Forfeit("invalid_action", last or "the judge refused the action")
        return Forfeit("crash", f"exited with code {self.proc.returncode}: {last}")

    def close(self, obs: Any = None, reward: float = 0.0) -> None:
        """End the game for the submission (its last step returns terminated), then stop its process and judge."""
        final = obs if obs is not None else self.observation_space.sample()
        self.inbox.put(("end", final, float(reward), True, False))  # also frees a judge thread waiting in SeatEnv
        if self.proc is not None and self.proc.poll() is None and self.moved:
            try:
                self.proc.wait(1.0)
            except subprocess.TimeoutExpired:
                pass
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        if self.judge is not None:
            self.judge.stop()
            self.judge = None
        self.stderr.close()
