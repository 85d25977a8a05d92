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
# pyzmq's Cython socket methods, under its Python wrappers (see server.py): about 1 us saved per call
_RawSocket = zmq.backend.Socket if issubclass(zmq.Socket, zmq.backend.Socket) else zmq.Socket
_raw_send, _raw_recv, _raw_get = _RawSocket.send, _RawSocket.recv, _RawSocket.get
_raw_recv_into = getattr(_RawSocket, "recv_into", None)
_RCVMORE = int(zmq.RCVMORE)
_REQ_PACK = P.BIN_REQ.pack
_REP_UNPACK = P.BIN_REP.unpack_from
_REP_SIZE = P.BIN_REP.size


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
        self._setup_binary(welcome)

    def _setup_binary(self, welcome: dict) -> None:
        """Use the binary step/reset frames when the judge offers them and both spaces have a fixed layout."""
        self._bin_act = self._bin_obs = None
        self._token_raw = b""
        obs_codec, act_codec = P.make_fixed_codec(self.observation_space), P.make_fixed_codec(self.action_space)
        if welcome.get("bin") != 1 or obs_codec is None or act_codec is None:
            return
        try:
            token_raw = bytes.fromhex(self.token)
        except (TypeError, ValueError):
            return
        if len(token_raw) != 16:
            return
        self._token_raw = token_raw
        self._bin_obs, self._bin_act = obs_codec, act_codec
        self._obs_frame = obs_codec.nbytes > P.BIN_INLINE_OBS_BYTES
        if self._obs_frame and _raw_recv_into is None:
            self._obs_frame = None  # no recv_into in this pyzmq: receive bytes and copy once

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

        def retry_frames() -> list[Any]:
            header["retry"] = True
            return P.encode(header)
        reply = self._roundtrip(P.encode(header), seq, header["t"], timeout, retries, retry_frames)
        if type(reply) is not dict:
            raise P.ProtocolError("malformed", "binary reply to a msgpack request")
        return reply

    def _binary_request(self, tag: bytes, flags: int, payload: bytes, what: str) -> Any:
        """Send one binary request frame; return the reply (a binary reply tuple or a msgpack header)."""
        sock = self._sock
        if sock is None:
            raise RuntimeError("RemoteEnv is closed")
        seq = self._seq
        self._seq = seq + 1
        wait_ms = int(1000 * self.timeout)
        if wait_ms != self._rcvtimeo:
            sock.setsockopt(zmq.RCVTIMEO, wait_ms)
            self._rcvtimeo = wait_ms
        token = self._token_raw
        _raw_send(sock, _REQ_PACK(tag, flags, seq, token) + payload)
        try:  # the common case: the very next message is the reply
            reply_seq, reply = self._read_reply(sock, _raw_recv(sock))
        except zmq.Again:
            reply_seq = reply = None
        if reply_seq == seq:
            if type(reply) is dict and reply["t"] == "error":
                raise RemoteError(str(reply.get("code")), str(reply.get("msg")))
            return reply
        return self._roundtrip(None, seq, what, None, None,
                               lambda: [_REQ_PACK(tag, flags | P.FLAG_RETRY, seq, token) + payload],
                               first_attempt=reply is not None)

    def _roundtrip(self, frames: list[Any] | None, seq: int, what: str, timeout: float | None,
                   retries: int | None, retry_frames: Any, first_attempt: bool = True) -> Any:
        """Send ``frames`` and wait for the reply numbered ``seq``, reconnecting and resending on timeouts.

        ``frames=None`` means the request was already sent; ``first_attempt=False`` that its first wait
        already timed out.
        """
        wait_ms = int(1000 * (self.timeout if timeout is None else timeout))
        attempts = (self.retries if retries is None else retries) + 1
        for attempt in range(attempts):
            if attempt:
                self.reconnect()
                frames = retry_frames()
            elif frames is None and not first_attempt:
                continue  # the first wait already timed out: go straight to the retries
            sock = self._sock
            if frames is not None:
                if len(frames) == 1:
                    _raw_send(sock, frames[0])
                else:
                    sock.send_multipart(frames, copy=not P.needs_zero_copy(frames))
            if wait_ms != self._rcvtimeo:
                sock.setsockopt(zmq.RCVTIMEO, wait_ms)
                self._rcvtimeo = wait_ms
            deadline = 0.0
            while True:
                try:
                    first = _raw_recv(sock)
                except zmq.Again:
                    break
                reply_seq, reply = self._read_reply(sock, first)
                if reply_seq == seq:
                    if type(reply) is dict and reply["t"] == "error":
                        raise RemoteError(str(reply.get("code")), str(reply.get("msg")))
                    return reply
                now = time.monotonic()
                deadline = deadline or now + wait_ms / 1000
                left = int((deadline - now) * 1000)
                if left <= 0:
                    break
                sock.setsockopt(zmq.RCVTIMEO, left)
                self._rcvtimeo = left
        raise JudgeTimeout(f"no reply from the judge at {self.address} to {what!r} "
                           f"within {wait_ms / 1000:.3g}s ({attempts} attempt(s))")

    def _read_reply(self, sock: zmq.Socket, first: bytes) -> tuple[Any, Any]:
        """Read the rest of a reply whose first frame is ``first``; return ``(seq, reply)``.

        A binary reply becomes ``(tag, flags, reward, obs)`` with a fresh observation (received straight
        into a new array when it has its own frame: one copy); a msgpack reply becomes its header dict.
        """
        if first[:1] != b"\xc1":
            frames = [first]
            while _raw_get(sock, _RCVMORE):
                frames.append(_raw_recv(sock))
            header = P.decode(frames, _CLIENT_MAX_MESSAGE_BYTES)
            return header.get("s"), header
        codec = self._bin_obs
        if codec is None or len(first) < _REP_SIZE:
            self._drain(sock)
            raise P.ProtocolError("malformed", "unexpected binary reply")
        tag, flags, seq, reward = _REP_UNPACK(first)
        if flags & P.FLAG_OBS_FRAME:
            if len(first) != _REP_SIZE:
                self._drain(sock)
                raise P.ProtocolError("malformed", "binary reply with a misplaced observation")
            if self._obs_frame:
                obs = codec.empty()
                size = _raw_recv_into(sock, obs)
            else:
                data = _raw_recv(sock)
                size = len(data)
                if size == codec.nbytes:
                    obs = codec.unpack(data, 0)
        else:
            size = len(first) - _REP_SIZE
            if size == codec.nbytes:
                obs = codec.unpack(first, _REP_SIZE)
        if size != codec.nbytes or _raw_get(sock, _RCVMORE):
            self._drain(sock)
            raise P.ProtocolError("malformed", "binary reply of the wrong size for the observation space")
        return seq, (tag, flags, reward, obs)

    @staticmethod
    def _drain(sock: zmq.Socket) -> None:
        while _raw_get(sock, _RCVMORE):
            _raw_recv(sock)

    # -- gymnasium API ---------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Reset the remote env; the seed is forwarded so the judge's episode reproduces."""
        super().reset(seed=seed)
        if self._bin_act is not None and options is None:
            if seed is None:
                reply = self._binary_request(P.BIN_RESET, 0, b"", "reset")
            elif type(seed) is int and 0 <= seed < 2**63:
                reply = self._binary_request(P.BIN_RESET, P.FLAG_SEED, P.BIN_SEED.pack(seed), "reset")
            else:
                reply = None
            if reply is not None:
                if type(reply) is tuple:
                    if reply[0] != P.BIN_RESET_REPLY:
                        raise P.ProtocolError("malformed", "binary reply of the wrong type")
                    return reply[3], {}
                return self._obs_dec(reply["o"]), _fresh_info(reply.get("i"))
        reply = self._request({"t": "reset", "k": self.token, "seed": seed, "opt": options})
        return self._obs_dec(reply["o"]), _fresh_info(reply.get("i"))

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        """Send one action and return the judge's observation, reward, terminated, truncated and info."""
        codec = self._bin_act
        if codec is not None:
            payload = codec.pack(action)
            if payload is not None:
                reply = self._binary_request(P.BIN_STEP, 0, payload, "step")
                if type(reply) is tuple:
                    tag, flags, reward, obs = reply
                    if tag != P.BIN_STEP_REPLY:
                        raise P.ProtocolError("malformed", "binary reply of the wrong type")
                    return obs, reward, flags & 1 == 1, flags & 2 == 2, {}
                return self._step_result(reply)
        return self._step_result(self._request({"t": "step", "k": self.token, "a": self._act_enc(action)}))

    def _step_result(self, reply: dict) -> tuple[Any, float, bool, bool, dict]:
        if reply.get("t") != "step":
            raise P.ProtocolError("malformed", "reply of the wrong type")
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
