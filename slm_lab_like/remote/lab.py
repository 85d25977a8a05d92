"""The lab's side of remote envs: a spec env entry with `remote` becomes a vector of RemoteEnv clients.

`remote: "tcp://HOST:PORT"` connects every body of the entry to a running single-agent judge (one
client session, hence one env, per body); `remote: "spawn"` starts a judge subprocess for the entry's
env and stops it when the env closes.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from envs.base import Clock
from envs.gym_vector import GymVectorEnv
from slm_lab_like.remote.client import RemoteEnv
from slm_lab_like.remote.spawn import spawn_judge, stop_judge

SPAWN = "spawn"
SCHEMES = ("tcp://", "ipc://")


def check_remote(remote: str) -> str | None:
    """None if `remote` is "spawn" or a ZeroMQ address, else a one-line reason."""
    if remote == SPAWN or remote.startswith(SCHEMES):
        return None
    return f'expected "spawn" or a judge address like "tcp://127.0.0.1:5555", got "{remote}"'


class RemoteVectorEnv(GymVectorEnv):
    """Bodies of one env entry as RemoteEnv clients of a judge; owns the judge process when it spawned it."""

    def __init__(self, name: str, remote: str, n: int, clock: Clock, max_t: int | None = None,
                 kwargs: dict[str, Any] | None = None, timeout: float = 30.0) -> None:
        self.judge = None
        if remote == SPAWN:
            self.judge, remote = spawn_judge(name, env_kwargs=kwargs or {})
        self.address = remote

        def make() -> gym.Env:
            env = RemoteEnv(remote, timeout=timeout)
            return gym.wrappers.TimeLimit(env, max_t) if max_t else env

        try:
            super().__init__(name, make, n, clock)
        except BaseException:
            self._stop_judge()
            raise

    def _stop_judge(self) -> None:
        if self.judge is not None:
            stop_judge(self.judge)
            self.judge = None

    def close(self) -> None:
        try:
            if not self._closed:
                super().close()
        finally:
            self._stop_judge()
