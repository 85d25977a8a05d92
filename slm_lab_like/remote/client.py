"""RemoteEnv: an ordinary ``gymnasium.Env`` whose dynamics run in a judge process behind ZeroMQ.

Spaces come from the judge's handshake, so any library that takes a gymnasium env (Stable-Baselines3,
the lab's own agents) can train or be evaluated through it. Every call returns freshly allocated
objects of the space's dtype; a judge that stays silent past ``timeout`` raises :class:`JudgeTimeout`
after ``retries`` reconnect attempts instead of hanging.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
import zmq

from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.protocol import JudgeTimeout, RemoteError

__all__ = ["RemoteEnv", "JudgeTimeout", "RemoteError"]

_CLIENT_MAX_MESSAGE_BYTES = 1 << 30


class RemoteEnv(gym.Env):
    """A gymnasium env served by a judge at ``address`` (``tcp://host:port``).

    ``token`` resumes a session or acts for a pre-issued multi-agent body; without it the judge issues
    one (single-agent: a fresh env instance; multi-agent: the next free body, or ``body`` by name).
    ``secret`` is the judge's shared secret, ``timeout`` the seconds to wait for each reply,
    ``retries`` how many times to reconnect and resend before raising :class:`JudgeTimeout`, and
    ``curve_server_key`` the judge's public CURVE key when it encrypts traffic.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        address: str,
        token: str | None = None,
        body: str | None = None,
        secret: str | None = None,
        timeout: float = 30.0,
        connect_timeout: float | None = None,
        retries: int = 1,
        render_mode: str | None = None,
        curve_server_key: bytes | None = None,
    ) -> None:
        self.address = address
        self.timeout = float(timeout)
        self.retries = int(retries)
        self._curve_server_key = curve_server_key
        self._ctx = zmq.Context.instance()
        self._sock: zmq.Socket | None = None
        self._seq = 0
        self._closed = False
        self._connect()
        try:
            welcome = self._request({"t": "hello", "v": P.PROTOCOL_VERSION, "k": token, "body": body,
                                     "auth": secret}, timeout=connect_timeout)
        except BaseException:
            self._close_socket()
            raise
        self.token: str = welcome["k"]
        self.body: str | None = welcome.get("body")
        self.env_id: str = welcome.get("env", "")
        self._seq = max(self._seq, int(welcome.get("last_seq", 0) or 0) + 1)
        self.observation_space = P.build_space(welcome["obs_space"])
        self.action_space = P.build_space(welcome["act_space"])
        served_mode = welcome.get("render_mode")
        self.metadata = {"render_modes": ["rgb_array"] if served_mode == "rgb_array" else [],
                         "render_fps": welcome.get("render_fps")}
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            self.close()
            raise ValueError(f"the judge at {address} does not render {render_mode!r}")
        self.render_mode = render_mode
        self.max_episode_steps: int | None = welcome.get("max_episode_steps")
        self._obs_dec = P.make_value_decoder(self.observation_space)
        self._act_enc = P.make_value_encoder(self.action_space)

    # -- transport -------------------------------------------------------------------------
    def _connect(self) -> None:
        sock = self._ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, _CLIENT_MAX_MESSAGE_BYTES)
        if self._curve_server_key is not None:
            public, secret = zmq.curve_keypair()
            sock.curve_serverkey = self._curve_server_key
            sock.curve_publickey = public
            sock.curve_secretkey = secret
        sock.connect(self.address)
        self._sock = sock
        self._rcvtimeo = -2

    def _close_socket(self) -> None:
        if self._sock is not None:
            self._sock.close(0)
            self._sock = None

    def reconnect(self) -> None:
        """Drop the socket and open a new one to the same judge (the token keeps the session)."""
        self._close_socket()
        self._connect()

    def _request(self, header: dict, timeout: float | None = None, retries: int | None = None) -> dict:
        if self._sock is None:
            raise RuntimeError("RemoteEnv is closed")
        seq = self._seq
        self._seq = seq + 1
        header["s"] = seq
        frames = P.encode(header)
        wait_ms = int(1000 * (self.timeout if timeout is None else timeout))
        attempts = (self.retries if retries is None else retries) + 1
        for attempt in range(attempts):
            if attempt:
                self.reconnect()
                header["retry"] = True
                frames = P.encode(header)
            sock = self._sock
            if len(frames) == 1:
                sock.send(frames[0])
            else:
                sock.send_multipart(frames, copy=not P.needs_zero_copy(frames))
            if wait_ms != self._rcvtimeo:
                sock.setsockopt(zmq.RCVTIMEO, wait_ms)
                self._rcvtimeo = wait_ms
            deadline = 0.0
            while True:
                try:
                    reply = P.decode(sock.recv_multipart(), _CLIENT_MAX_MESSAGE_BYTES)
                except zmq.Again:
                    break
                if reply.get("s") == seq:
                    if reply["t"] == "error":
                        raise RemoteError(str(reply.get("code")), str(reply.get("msg")))
                    return reply
                now = time.monotonic()
                deadline = deadline or now + wait_ms / 1000
                left = int((deadline - now) * 1000)
                if left <= 0:
                    break
                sock.setsockopt(zmq.RCVTIMEO, left)
                self._rcvtimeo = left
        raise JudgeTimeout(f"no reply from the judge at {self.address} to {header['t']!r} "
                           f"within {wait_ms / 1000:.3g}s ({attempts} attempt(s))")

    # -- gymnasium API ---------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Reset the remote env; the seed is forwarded so the judge's episode reproduces."""
        super().reset(seed=seed)
        reply = self._request({"t": "reset", "k": self.token, "seed": seed, "opt": options})
        return self._obs_dec(reply["o"]), _fresh_info(reply.get("i"))

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        """Send one action and return the judge's observation, reward, terminated, truncated and info."""
        reply = self._request({"t": "step", "k": self.token, "a": self._act_enc(action)})
        return (self._obs_dec(reply["o"]), float(reply["r"]), bool(reply["te"]), bool(reply["tr"]),
                _fresh_info(reply.get("i")))

    def render(self) -> np.ndarray | None:
        """Return the judge's rgb_array frame when this env was made with ``render_mode="rgb_array"``."""
        if self.render_mode != "rgb_array":
            return None
        frame = self._request({"t": "render", "k": self.token})["f"]
        return np.array(frame, dtype=np.uint8)

    def ping(self, timeout: float | None = None) -> float:
        """Send a heartbeat and return the round-trip time in seconds."""
        start = time.perf_counter()
        self._request({"t": "ping", "k": self.token}, timeout=timeout)
        return time.perf_counter() - start

    def close(self) -> None:
        """Tell the judge this client is done (its episode ends cleanly) and close the socket; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._sock is not None and getattr(self, "token", None):
            try:
                self._request({"t": "close", "k": self.token}, timeout=min(self.timeout, 2.0), retries=0)
            except (JudgeTimeout, RemoteError, zmq.ZMQError, P.ProtocolError):
                pass
        self._close_socket()
        super().close()


def _fresh_info(info: Any) -> dict:
    """Return the info map as a new dict whose arrays are writable copies."""
    if not info:
        return {}
    return {k: _fresh_value(v) for k, v in info.items()}


def _fresh_value(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, dict):
        return {k: _fresh_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh_value(v) for v in value]
    return value
