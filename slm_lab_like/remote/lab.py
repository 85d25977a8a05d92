"""The lab's side of remote envs: the bodies of a spec env entry with `remote` are N copies hosted by one judge.

`remote: "tcp://HOST:PORT"` connects the entry's bodies to a running single-agent judge; `remote: "spawn"` starts
a judge subprocess for the entry's env and stops it when the env closes. The bodies travel in one vector session
(:class:`~slm_lab_like.remote.vector_client.RemoteVecEnv`: one round trip per lab step); a judge that hosts no
vector sessions gets one RemoteEnv client per body instead. Either way the same seed gives the same trajectories
as local copies of the env.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from slm_lab_like.envs.base import Clock
from slm_lab_like.envs.gym_vector import SameStepVectorEnv
from slm_lab_like.envs.spaces import lab_view, observation_converter
from slm_lab_like.remote.client import RemoteEnv
from slm_lab_like.remote.protocol import RemoteError
from slm_lab_like.remote.spawn import spawn_judge, stop_judge
from slm_lab_like.remote.vector_client import RemoteVecEnv

SPAWN = "spawn"
SCHEMES = ("tcp://", "ipc://")


def check_remote(remote: str) -> str | None:
    """None if `remote` is "spawn" or a ZeroMQ address, else a one-line reason."""
    if remote == SPAWN or remote.startswith(SCHEMES):
        return None
    return f'expected "spawn" or a judge address like "tcp://127.0.0.1:5555", got "{remote}"'


def _client(address: str, max_t: int | None, timeout: float, where: str, options: dict[str, Any]) -> gym.Env:
    """One body's RemoteEnv as the lab steps it (the entry's step limit, flattened observations)."""
    env: gym.Env = RemoteEnv(address, timeout=timeout, **options)
    env = gym.wrappers.TimeLimit(env, max_t) if max_t else env
    return lab_view(env, where)


def remote_vector(address: str, n: int, max_t: int | None, timeout: float, where: str,
                  **options: Any) -> gym.vector.VectorEnv:
    """The bodies' copies as one vector env (SAME_STEP autoreset): a vector session of the judge, or per-body
    clients stepped in turn when the judge hosts no vector sessions (a multi-agent judge's seat, whose `token` is
    among `options`); `options` are the clients' (secret, curve_server_key, heartbeat, token)."""
    if "token" not in options:
        try:
            return RemoteVecEnv(address, n, max_t=max_t, timeout=timeout, **options)
        except RemoteError as err:
            if err.code != "unsupported":
                raise
    return gym.vector.SyncVectorEnv([partial(_client, address, max_t, timeout, where, options)] * n,
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


class RemoteVectorEnv(SameStepVectorEnv):
    """Bodies of one env entry as copies hosted by a judge; owns the judge process when it spawned it."""

    def __init__(self, name: str, remote: str, n: int, clock: Clock, max_t: int | None = None,
                 kwargs: dict[str, Any] | None = None, timeout: float = 30.0, **options: Any) -> None:
        self.judge = None
        self._closed = False
        if remote == SPAWN:
            self.judge, remote = spawn_judge(name, env_kwargs=kwargs or {})
        self.address = remote
        where = f'env "{name}"'
        try:
            self.venv = remote_vector(remote, n, max_t, timeout, where, **options)
            space, self._convert = observation_converter(self.venv.single_observation_space, where)
            if isinstance(self.venv, gym.vector.SyncVectorEnv):
                self._convert = None  # its clients flatten their own observations
            self._start(name, n, clock, space)
        except BaseException:
            self.close()
            raise

    def _put(self, out: np.ndarray, obs: Any, rows: Any = slice(None)) -> None:
        """Write observations into a slot buffer, flattened where the lab holds them flat."""
        if self._convert is None:
            super()._put(out, obs, rows)
        else:
            out[rows] = np.stack([self._convert(o) for o in obs])

    def render(self) -> object:
        return None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            venv = getattr(self, "venv", None)
            if venv is not None:
                venv.close()
        finally:
            if self.judge is not None:
                stop_judge(self.judge)
                self.judge = None
