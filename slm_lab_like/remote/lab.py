"""The lab's side of remote envs: the bodies of a spec env entry with `remote` are N copies hosted by one judge.

`remote: "tcp://HOST:PORT"` connects the entry's bodies to a running single-agent judge; `remote: "spawn"` and
`remote: "ray"` start `remote.judges` judges for the entry's env (processes here, or Ray actors over the run's
cluster: `remote/placement.py`), share the bodies out over them (`remote/shards.py`) and stop them when the env
closes. A judge's bodies travel in one vector session
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
from slm_lab_like.envs.spaces import lab_view, mask_layout, observation_converter
from slm_lab_like.remote.client import RemoteEnv
from slm_lab_like.remote.placement import JudgeSet
from slm_lab_like.remote.protocol import RemoteError, tcp_host_port
from slm_lab_like.remote.shards import JudgeShards
from slm_lab_like.remote.vector_client import RemoteVecEnv

SPAWN, RAY = "spawn", "ray"
LAB_JUDGES = (SPAWN, RAY)  # addresses that ask the lab to start the entry's judges itself


def check_remote(remote: str) -> str | None:
    """None if `remote` is "spawn", "ray" or a judge address a client can connect to (tcp://HOST:PORT, ipc://PATH),
    else a one-line reason."""
    expected = f'expected "spawn", "ray" or a judge address like "tcp://127.0.0.1:5555", got "{remote}"'
    if remote in LAB_JUDGES:
        return None
    if remote.startswith("ipc://"):
        return None if len(remote) > len("ipc://") else f"{expected}: ipc:// needs a path"
    if not remote.startswith("tcp://"):
        return expected
    host, port = tcp_host_port(remote) or ("", "")
    if not host:
        return f"{expected}: a tcp address needs a host and a port"
    if host == "*" or host == "0.0.0.0":
        return f'{expected}: "{host}" is where a judge listens; a client needs the judge\'s host'
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return f"{expected}: the port must be a number from 1 to 65535"
    return None


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
    """Bodies of one env entry as copies hosted by a judge at `remote`, or by `judges` the lab started (which it
    stops when it closes)."""

    def __init__(self, name: str, remote: str, n: int, clock: Clock, max_t: int | None = None,
                 timeout: float = 30.0, judges: JudgeSet | None = None, **options: Any) -> None:
        self._closed = False
        self.address = remote
        where = f'env "{name}"'
        venv: gym.vector.VectorEnv
        try:
            if judges is not None:
                venv = JudgeShards(judges, n, where, max_t, timeout, **options)
            else:
                venv = remote_vector(remote, n, max_t, timeout, where, **options)
            self.venv = venv
            space, self._convert = observation_converter(venv.single_observation_space, where)
            self._masks = None
            if isinstance(venv, gym.vector.SyncVectorEnv):
                self._convert = None  # its clients flatten their own observations
                seat = venv.envs[0].unwrapped
                if isinstance(seat, RemoteEnv) and seat.body is not None:  # a game's seat: its legal moves go to the block's masks, not the agent
                    self._masks = mask_layout(seat.observation_space, seat.action_space)
                    space = space if self._masks is None else self._masks[0]
            self._start(name, n, clock, space)
            if self._masks is not None:
                self.block.add_action_masks(self._masks[2].stop - self._masks[2].start)
        except BaseException:
            self.close()
            if judges is not None and not hasattr(self, "venv"):
                judges.close()
            raise

    def _put(self, out: np.ndarray, obs: Any, rows: Any = slice(None)) -> None:
        """Write observations into a slot buffer, flattened where the lab holds them flat; a game seat's legal-action
        mask into the mask buffer paired with ``out``."""
        if self._convert is not None:
            flat = np.stack([self._convert(o) for o in obs])
        else:
            flat = np.stack(obs) if isinstance(obs, list) else obs
        if self._masks is None:
            out[rows] = flat
            return
        _, features, legal = self._masks
        out[rows] = flat[:, features]
        self._mask_of(out)[rows] = flat[:, legal] > 0.5

    def _mask_of(self, out: np.ndarray) -> np.ndarray:
        """The legal-action mask buffer paired with the observation buffer ``out`` (a parity's, or the final one)."""
        blk = self.block
        masks, final = blk.mask_buffers()
        if out is blk.final_obs:
            return final
        return masks[0] if out is blk.obs[0] else masks[1]

    def render(self) -> object:
        return None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        venv = getattr(self, "venv", None)
        if venv is not None:
            venv.close()  # JudgeShards stops the judges it was given
