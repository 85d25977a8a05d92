"""RemoteVecEnv: N copies of a judge's env in one session, stepped in one round trip, as a gymnasium VectorEnv.

A library that trains on vector envs pays one round trip per step of all N copies instead of one per copy. The
judge hosts the copies (a hello with ``"n": N``); actions and observations travel stacked, as raw buffers.

Autoreset is gymnasium's SAME_STEP (``metadata["autoreset_mode"]``): a copy whose episode ends is reset in the
same step, its returned observation is the next episode's first, and the last one is in
``info["final_obs"][i]`` (``info["_final_obs"]`` marks the copies that ended; ``final_info`` likewise), as
``gymnasium.vector.SyncVectorEnv(..., autoreset_mode=SAME_STEP)`` does. ``reset(seed=s)`` seeds copy i with
``s + i`` (or ``seed[i]`` from a list); autoresets are not seeded, so each copy's RNG runs on, as in a local env.
``max_t`` asks the judge to truncate every copy's episodes at that many steps (below the env's own limit).
Sessions that the judge forgot (expired while this client was stopped) are renewed: that step ends every copy's
episode, truncated, with ``info["reason"] == "session_expired"``, and returns the new episodes' first observations.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import zmq
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.client import HEARTBEAT, LOST_SESSION, Link, close_link, gather, parse_msgpack
from slm_lab_like.remote.protocol import RemoteError

__all__ = ["RemoteVecEnv"]

_REP_UNPACK = P.BIN_REP.unpack_from
_REP_SIZE = P.BIN_REP.size


class RemoteVecEnv(gym.vector.VectorEnv):
    """``num_envs`` copies of the env a single-agent judge at ``address`` hosts, in one session (see module doc).

    ``secret``, ``timeout``, ``connect_timeout``, ``retries``, ``heartbeat``, ``curve_server_key``, ``lane`` and
    ``spin`` are :class:`~slm_lab_like.remote.client.RemoteEnv`'s. A judge that cannot host vector sessions (a multi-agent
    judge, spaces without a fixed raw layout) refuses with RemoteError code ``unsupported``.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, address: str, num_envs: int, *, max_t: int | None = None, secret: str | None = None,
                 timeout: float = 30.0, connect_timeout: float | None = None, retries: int = 1,
                 heartbeat: float = HEARTBEAT, curve_server_key: bytes | str | None = None, lane: bool = True,
                 spin: float | None = None) -> None:
        self.address = address
        self._link = Link(address, timeout, retries, heartbeat, curve_server_key, lane, spin)
        self._hello = {"k": None, "n": int(num_envs), "max_t": max_t, "auth": secret}
        self._connect_timeout = connect_timeout
        self._closed = False
        welcome = self._link.open(dict(self._hello), connect_timeout)
        self._take(welcome)
        self.num_envs = int(welcome["n"])
        self.single_observation_space = P.build_space(welcome["obs_space"])
        self.single_action_space = P.build_space(welcome["act_space"])
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.env_id: str = welcome.get("env", "")
        self.max_episode_steps: int | None = welcome.get("max_episode_steps")
        self._codec = P.make_vector_codec(self.single_observation_space, self.single_action_space, self.num_envs)
        self._binary = welcome.get("bin") == 1 and self._codec is not None
        self._last_obs: np.ndarray | None = None

    def _take(self, welcome: dict) -> None:
        self.token: str = welcome["k"]
        self._token_raw = bytes.fromhex(self.token)

    # -- gymnasium VectorEnv API -----------------------------------------------------------
    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Reset every copy (copy i seeded with ``seed + i``, or ``seed[i]``)."""
        if seed is not None and not isinstance(seed, (int, list)):
            seed = list(seed)
        try:
            reply = self._reset(seed, options)
        except RemoteError as err:
            if err.code not in LOST_SESSION:
                raise
            self._renew()
            reply = self._reset(seed, options)
        obs, _, _, _, infos = self._result(reply)
        self._last_obs = obs
        return obs, infos

    def _reset(self, seed: int | list | None, options: dict | None) -> Any:
        if self._binary and options is None and not isinstance(seed, list):
            if seed is None:
                return self._link.binary(P.BIN_VRESET, 0, self._token_raw, b"", "vreset", self._read_reply,
                                         self._parse_reply)
            if type(seed) is int and 0 <= seed < 2**63:
                return self._link.binary(P.BIN_VRESET, P.FLAG_SEED, self._token_raw, P.BIN_SEED.pack(seed), "vreset",
                                         self._read_reply, self._parse_reply)
        return self._link.request({"t": "vreset", "k": self.token, "seed": seed, "opt": options})

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step every copy with its action; copies whose episode ended are reset in the same step."""
        try:
            result = self._result(self._step(actions))
        except RemoteError as err:
            if err.code not in LOST_SESSION:
                raise
            return self._restart()
        self._last_obs = result[0]
        return result

    def _step(self, actions: Any) -> Any:
        codec = self._codec
        payload = codec.pack_actions(actions) if self._binary and codec is not None else None
        if payload is not None:
            return self._link.binary(P.BIN_VSTEP, 0, self._token_raw, payload, "vstep", self._read_reply,
                                     self._parse_reply)
        return self._link.request({"t": "vstep", "k": self.token, "a": np.asarray(actions)})

    def _renew(self) -> None:
        """Say hello again after the judge forgot this session (the copies' episodes are gone with it)."""
        self._take(self._link.hello(dict(self._hello), self._connect_timeout))

    def _restart(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        """A renewed session's first step: every copy's episode ends truncated, the new episodes begin."""
        last = self._last_obs
        self._renew()
        obs, infos = self.reset()
        n = self.num_envs
        for i in range(n):
            final = None if last is None else last[i].copy()
            self._add_info(infos, {"final_obs": final, "final_info": {"reason": "session_expired"}}, i)
        return obs, np.zeros(n), np.zeros(n, bool), np.ones(n, bool), infos

    # -- replies ---------------------------------------------------------------------------
    def _read_reply(self, sock: zmq.Socket, first: bytes) -> tuple[Any, Any]:
        """``(seq, reply)`` of a reply on the ZeroMQ socket (a binary reply is one frame: the link refuses more)."""
        return self._parse_reply([first] if first[:1] == b"\xc1" else gather(sock, first))

    def _parse_reply(self, frames: list[bytes]) -> tuple[Any, Any]:
        """``(seq, reply)`` of a reply's frames: a binary reply as its frame, a msgpack one as its header."""
        first = frames[0]
        if first[:1] != b"\xc1":
            return parse_msgpack(frames)
        if len(first) < _REP_SIZE or self._codec is None or len(frames) != 1:
            raise P.ProtocolError("malformed", "unexpected binary reply")
        return _REP_UNPACK(first)[2], first

    def _result(self, reply: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Observations, rewards, terminated, truncated and the vector info of a reply."""
        if type(reply) is bytes:
            if reply[:2] not in (P.BIN_VSTEP_REPLY, P.BIN_VRESET_REPLY):
                raise P.ProtocolError("malformed", "binary reply of the wrong type")
            assert self._codec is not None  # _parse_reply takes binary replies only with a codec
            rewards, terminated, truncated, obs, finals = self._codec.unpack_reply(reply, _REP_SIZE)
            infos: dict = {}
            if finals is not None:
                for j, i in enumerate(np.flatnonzero(terminated | truncated)):
                    self._add_info(infos, {"final_obs": finals[j], "final_info": {}}, int(i))
            return obs, rewards, terminated, truncated, infos
        if reply.get("t") not in ("vstep", "vreset"):
            raise P.ProtocolError("malformed", "reply of the wrong type")
        return self._msgpack_result(reply)

    def _msgpack_result(self, reply: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        n, space = self.num_envs, self.observation_space
        obs = P.array_from_wire(space, reply["o"])
        rewards = np.asarray(reply["r"], np.float64).reshape(n)
        terminated = np.asarray(reply["te"], bool).reshape(n)
        truncated = np.asarray(reply["tr"], bool).reshape(n)
        infos: dict = {}
        for i, info in enumerate(reply.get("i") or ()):
            if info:
                self._add_info(infos, P.fresh_copy(info), i)
        ended = reply.get("fx") or []
        if ended:
            finals = np.array(reply["fo"], dtype=space.dtype)
            final_infos = reply.get("fi") or [{}] * len(ended)
            for j, i in enumerate(ended):
                self._add_info(infos, {"final_obs": finals[j].copy(), "final_info": P.fresh_copy(final_infos[j])}, int(i))
        return obs, rewards, terminated, truncated, infos

    def abandon(self) -> None:
        """Close the socket without a word to the judge: it is gone (a close would wait for it in vain)."""
        if not self._closed:
            self._closed = True
            self._link.close()

    def close_extras(self, **kwargs: Any) -> None:
        """Tell the judge this client is done (the copies' episodes end) and close the socket."""
        if not self._closed:
            self._closed = True
            close_link(self._link, getattr(self, "token", None))
