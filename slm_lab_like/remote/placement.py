"""Judges the lab starts and stops itself for an env entry's bodies: `remote: "spawn"` (processes on this machine's
loopback) or `remote: "ray"` (Ray actors over the run's cluster, `remote/ray_judges.py`). Both are a `JudgeSet`:
judge j's address, a replacement for a judge that was lost, the public CURVE key clients need, and a close that
stops them all.
"""
from __future__ import annotations

import logging
from typing import Any, Protocol

from slm_lab_like.remote.options import MAX_SESSIONS
from slm_lab_like.remote.spawn import JudgeProcess, spawn_judge, stop_judge

log = logging.getLogger("slm_lab_like")


class JudgeSet(Protocol):
    """`count` judges of one env, started by the lab; judge j answers at `address(j)`."""

    count: int
    curve_public_key: bytes | None

    def address(self, j: int) -> str: ...

    def replace(self, j: int) -> str:
        """Stop judge j (lost, or not answering) and start another in its place; the new one's address."""
        ...

    def close(self) -> None: ...


class SpawnedJudges:
    """`count` judge processes of env `name` on this machine's loopback (`remote: "spawn"`)."""

    curve_public_key: bytes | None = None  # loopback only: no encryption

    def __init__(self, name: str, kwargs: dict[str, Any], count: int, max_sessions: int = 64) -> None:
        self.name, self.kwargs, self.count, self.max_sessions = name, kwargs, count, max_sessions
        self.procs: list[JudgeProcess | None] = []
        self.addresses: list[str] = []
        try:
            for _ in range(count):
                proc, address = spawn_judge(name, env_kwargs=kwargs, max_sessions=max_sessions)
                self.procs.append(proc)
                self.addresses.append(address)
        except BaseException:
            self.close()
            raise

    def address(self, j: int) -> str:
        return self.addresses[j]

    def replace(self, j: int) -> str:
        old = self.procs[j]
        if old is not None:
            stop_judge(old)
        self.procs[j] = None
        self.procs[j], self.addresses[j] = spawn_judge(self.name, env_kwargs=self.kwargs, max_sessions=self.max_sessions)
        return self.addresses[j]

    def close(self) -> None:
        for j, proc in enumerate(self.procs):
            if proc is not None:
                stop_judge(proc)
                self.procs[j] = None


def start_judges(name: str, kwargs: dict[str, Any], where: str, count: int, bodies: int,
                 resources: tuple[float, float] = (1.0, 0.0), curve: bool | None = None) -> JudgeSet:
    """`count` judges of env `name` for `bodies` bodies, started by the lab: processes here (`where` "spawn") or Ray
    actors ("ray", each with `resources` (cpu, gpu); CURVE per `curve`, see RayJudges)."""
    capacity = max(MAX_SESSIONS, -(-bodies // count))  # a judge hosts its block's copies whatever their number
    if where == "ray":
        from slm_lab_like.remote.ray_judges import RayJudges

        return RayJudges(name, kwargs, count, resources[0], resources[1], curve, capacity)
    return SpawnedJudges(name, kwargs, count, capacity)
