"""RemoteEnv: an ordinary ``gymnasium.Env`` whose dynamics run in a judge process behind ZeroMQ.

Spaces come from the judge's handshake, so any library that takes a gymnasium env (Stable-Baselines3,
the lab's own agents) can train or be evaluated through it. Every call returns freshly allocated
objects of the space's dtype.

Every wait has a deadline. A judge that is gone (its process killed, its host unreachable) is noticed within
``heartbeat`` seconds of its connection dropping (ZeroMQ heartbeats drop a connection whose judge stops
answering them); a live judge that does not answer within ``timeout`` is asked again ``retries`` times on a new
connection; either way :class:`JudgeTimeout` ends the wait. A judge that refuses a hello as busy or full says
when to retry, and the client does, within its connect timeout. A client whose session the judge forgot
(expired while the client was stopped, or a restarted judge) says hello again: its next step is a truncated
end of episode with ``info["reason"] == "session_expired"`` and its next reset starts afresh, as in any
gymnasium loop.
"""

from __future__ import annotations

import itertools
import os
import random
import secrets
import time
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import zmq
from zmq.utils.monitor import recv_monitor_message

from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.lane import LaneClient
from slm_lab_like.remote.options import curve_public_key
from slm_lab_like.remote.protocol import JudgeTimeout, RemoteError
from slm_lab_like.remote.transport import (EVENTS, POLLIN, RCVMORE, raw_get, raw_recv, raw_recv_into, raw_send,
                                            receive_first)

__all__ = ["RemoteEnv", "Link", "JudgeTimeout", "RemoteError", "HEARTBEAT", "gather", "parse_msgpack"]

HEARTBEAT = 3.0
"""Seconds: a judge whose connection is down this long is gone (heartbeats every third of it)."""
CONNECT_GRACE = 5.0
LOST_SESSION = ("session_expired", "unknown_token")
_CLIENT_MAX_MESSAGE_BYTES = 1 << 30
_REQ_PACK = P.BIN_REQ.pack
_REP_UNPACK = P.BIN_REP.unpack_from
_REP_SIZE = P.BIN_REP.size
_NO_REPLY = object()
_LOOK_EVERY = 0.05  # seconds between looks at the connection's events on the request path
_MONITORS = itertools.count()
_OPEN_MONITORS: set[zmq.Socket] = set()  # closed only by close_monitor, never by the garbage collector


def monitor_socket(sock: zmq.Socket, events: int) -> zmq.Socket:
    """A PAIR socket that receives `sock`'s connection `events`; close it with close_monitor. libzmq sends monitor
    events from its I/O thread with a blocking send, and that thread serves every ZeroMQ socket of the process, so
    the send must never wait: the queue has no limit (pyzmq's get_monitor_socket stops at 1000 events, which a
    client nobody reads for a while reaches), and the PAIR stays open while `sock` may still send to it (a client
    dropped without close, collected monitor first, would leave the next event with no taker)."""
    address = f"inproc://slm-lab-monitor-{os.getpid()}-{next(_MONITORS)}"
    sock.monitor(address, events)
    monitor = sock.context.socket(zmq.PAIR)
    monitor.setsockopt(zmq.RCVHWM, 0)  # an inproc pipe with either end's limit at 0 has none
    monitor.connect(address)
    _OPEN_MONITORS.add(monitor)
    return monitor


def close_monitor(sock: zmq.Socket, monitor: zmq.Socket) -> None:
    """Stop `sock`'s events, then close their `monitor` (in this order: an event sent to a closed monitor would
    stop ZeroMQ's I/O thread)."""
    try:
        sock.disable_monitor()
    except zmq.ZMQError:  # sock is closed already: it sends nothing more
        pass
    _OPEN_MONITORS.discard(monitor)
    monitor.close(0)

Reader = Callable[[zmq.Socket, bytes], tuple[Any, Any]]
Parser = Callable[[list[bytes]], tuple[Any, Any]]


def read_msgpack(sock: zmq.Socket, first: bytes) -> tuple[Any, Any]:
    """Read the rest of a msgpack reply whose first frame is ``first``; return ``(seq, header)``."""
    if first[:1] == b"\xc1":
        drain(sock)
        raise P.ProtocolError("malformed", "unexpected binary reply")
    header = P.decode(gather(sock, first), _CLIENT_MAX_MESSAGE_BYTES)
    return header.get("s"), header


def gather(sock: zmq.Socket, first: bytes) -> list[bytes]:
    """Every frame of a message whose first frame is ``first``."""
    frames = [first]
    while raw_get(sock, RCVMORE):
        frames.append(raw_recv(sock))
    return frames


def parse_msgpack(frames: list[bytes]) -> tuple[Any, dict]:
    """``(seq, header)`` of a msgpack reply's frames."""
    header = P.decode(frames, _CLIENT_MAX_MESSAGE_BYTES)
    return header.get("s"), header


def drain(sock: zmq.Socket) -> None:
    """Discard the remaining frames of a message."""
    while raw_get(sock, RCVMORE):
        raw_recv(sock)


class Link:
    """A client's connection to one judge: the DEALER socket with ZeroMQ heartbeats and a monitor that notices a
    judge that is gone, the same-host lane when the judge offers one and ``lane`` allows it (binary requests go
    there; ``spin`` seconds of polling before sleeping on a reply, None: the lane's adaptive default), sequence
    numbers, waits with deadlines, retransmits, and admission with retries."""

    def __init__(self, address: str, timeout: float, retries: int, heartbeat: float = HEARTBEAT,
                 curve_server_key: bytes | str | None = None, lane: bool = True, spin: float | None = None) -> None:
        if not heartbeat > 0:
            raise ValueError("heartbeat must be a positive number of seconds")
        self.address = address
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.heartbeat = float(heartbeat)
        self._slice = max(0.05, self.heartbeat / 3)
        self._slice_ms = int(self._slice * 1000)
        self._curve_server_key = curve_public_key(curve_server_key)
        self._ctx: zmq.Context = zmq.Context.instance()
        self.sock: zmq.Socket | None = None
        self.seq = 0
        self.use_lane, self.spin = lane, None if spin is None else float(spin)
        self.lane: LaneClient | None = None
        self._connect()

    # -- the connection --------------------------------------------------------------------
    def _connect(self) -> None:
        sock = self._ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, _CLIENT_MAX_MESSAGE_BYTES)
        sock.setsockopt(zmq.HEARTBEAT_IVL, self._slice_ms)
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, max(1, int(self.heartbeat * 1000)))
        sock.setsockopt(zmq.SNDTIMEO, max(1, int(self.timeout * 1000)))  # see _send
        if self._curve_server_key is not None:
            public, secret = zmq.curve_keypair()
            sock.curve_serverkey = self._curve_server_key
            sock.curve_publickey = public
            sock.curve_secretkey = secret
        self._monitor = monitor_socket(sock, zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
        sock.connect(self.address)
        self.sock = sock
        self._rcvtimeo = -2
        self._unended = False  # whether the last reply's end is still to be checked (see _end_reply)
        self._down_since: float | None  # since when the connection is down (None while it is up)
        self._up, self._down_since, self._drops = False, time.monotonic(), 0
        self._ever_up, self._looked = False, 0.0

    def close(self) -> None:
        """Close the socket, its monitor and the lane; idempotent."""
        self._close_lane()
        if self.sock is not None:
            close_monitor(self.sock, self._monitor)
            self.sock.close(0)
            self.sock = None

    def reconnect(self) -> None:
        """Drop the socket and open a new one to the same judge (the token keeps the session)."""
        self.close()
        self._connect()

    def _open_lane(self, path: Any) -> None:
        """Connect to the judge's lane when it offers one this client can reach (otherwise stay on ZeroMQ)."""
        if self.use_lane and self.lane is None and isinstance(path, str):
            try:
                self.lane = LaneClient(path, self.spin)
            except OSError:
                self.lane = None

    def _close_lane(self) -> None:
        if self.lane is not None:
            self.lane.close()
            self.lane = None

    def _events(self) -> None:
        """Read the connection's events (handshake done, connection dropped) that came since the last look."""
        now = time.monotonic()
        while True:
            try:
                event = recv_monitor_message(self._monitor, zmq.NOBLOCK)["event"]
            except zmq.Again:
                break
            if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._up, self._down_since, self._ever_up = True, None, True
            elif event == zmq.EVENT_DISCONNECTED and self._up:
                self._up, self._down_since, self._drops = False, now, self._drops + 1

    def _look(self, now: float) -> None:
        """Read the connection's events when some came (so a drop is dated close to when it happened)."""
        self._looked = now
        if raw_get(self._monitor, EVENTS) & POLLIN:
            self._events()

    def _watch(self) -> None:
        """JudgeTimeout when the connection has been down for ``heartbeat`` seconds (a connection not yet made gets
        at least CONNECT_GRACE seconds: a judge on a busy machine may take a moment to answer its first one)."""
        self._events()
        limit = self.heartbeat if self._ever_up else max(self.heartbeat, CONNECT_GRACE)
        down_since = self._down_since
        if not self._up and down_since is not None and time.monotonic() - down_since > limit:
            raise JudgeTimeout(f"the judge at {self.address} is gone: no connection for {self.heartbeat:g} s "
                               "(its process ended, or its host does not answer heartbeats)")

    # -- requests: one await path, one retry rule ---------------------------------------------
    def request(self, header: dict, timeout: float | None = None, retries: int | None = None) -> dict:
        """Send a msgpack request (by ZeroMQ) and return the reply header (RemoteError for an error reply)."""
        seq = self._number()
        header["s"] = seq

        def retry_frames() -> list[Any]:
            header["retry"] = True
            return P.encode(header)
        reply = self._exchange(P.encode(header), seq, header["t"], timeout, retries, retry_frames, read_msgpack,
                               parse_msgpack, lane=False)
        if type(reply) is not dict:
            raise P.ProtocolError("malformed", "binary reply to a msgpack request")
        return reply

    def binary(self, tag: bytes, flags: int, token: bytes, payload: bytes, what: str, read: Reader,
               parse: Parser) -> Any:
        """Send one binary request frame (by the lane when there is one); return the reply as ``read`` (ZeroMQ)
        or ``parse`` (lane) makes it, or a msgpack header."""
        seq = self._number()
        return self._exchange([_REQ_PACK(tag, flags, seq, token) + payload], seq, what, None, None,
                              lambda: [_REQ_PACK(tag, flags | P.FLAG_RETRY, seq, token) + payload], read, parse,
                              lane=True)

    def _number(self) -> int:
        """The next request's sequence number (a closed link sends nothing)."""
        if self.sock is None:
            raise RuntimeError("the client is closed")
        seq = self.seq
        self.seq = seq + 1
        return seq

    def _exchange(self, frames: list[Any], seq: int, what: str, timeout: float | None, retries: int | None,
                  retry_frames: Callable[[], list[Any]], read: Reader, parse: Parser, lane: bool) -> Any:
        """Send ``frames`` (by the lane when ``lane`` and one is open) and wait for the reply numbered ``seq``. The
        retry rule: a lane that breaks is dropped and the request resent by ZeroMQ at once; a judge silent past
        ``timeout`` gets a new connection (ZeroMQ alone from then on) and the request resent, ``retries`` times;
        JudgeTimeout then, or as soon as the judge is gone."""
        wait = self.timeout if timeout is None else timeout
        attempts = (self.retries if retries is None else retries) + 1
        now = time.monotonic()
        if now - self._looked > _LOOK_EVERY:
            self._look(now)
        for attempt in range(attempts):
            if attempt:
                self.reconnect()
                frames = retry_frames()
            while True:
                by_lane = self.lane if lane else None
                try:
                    reply = self._await(by_lane, frames, seq, wait, read, parse, retry_frames)
                    break
                except OSError:  # the lane broke (ZeroMQ's failures are ZMQErrors, not OSErrors)
                    if by_lane is None:
                        raise
                    self._close_lane()
                    frames = retry_frames()
            if reply is not _NO_REPLY:
                return reply
        raise JudgeTimeout(f"no reply from the judge at {self.address} to {what!r} "
                           f"within {wait:.3g}s ({attempts} attempt(s))")

    def _await(self, lane: LaneClient | None, frames: list[Any], seq: int, wait: float, read: Reader, parse: Parser,
               retry_frames: Callable[[], list[Any]]) -> Any:
        """Send ``frames`` and wait ``wait`` seconds for the reply numbered ``seq`` (_NO_REPLY after them), by the lane
        or by ZeroMQ; resent when the ZeroMQ connection dropped and came back meanwhile; JudgeTimeout when the judge
        is gone. An error without a number is the judge's answer to a request it could not read (too large,
        malformed): the link has one request out, so it is this one's."""
        deadline = time.monotonic() + wait
        if lane is not None:
            lane.send(frames[0])
        elif not self._send(frames):
            return _NO_REPLY
        drops = self._drops
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return _NO_REPLY
            got = self._receive(lane, min(left, self._slice), read, parse)
            if got is None:
                self._watch()
                if lane is None and self._drops != drops and self._up:
                    drops = self._drops
                    self._send(retry_frames())
                continue
            reply_seq, reply = got
            if type(reply) is dict and reply.get("t") == "error" and reply_seq in (seq, None):
                raise P.remote_error(reply)
            if reply_seq == seq:
                return reply
            if lane is None and self.sock is not None:  # a stale reply (to a request given up): its end is checked now
                self._end_reply(self.sock)

    def _send(self, frames: list[Any]) -> bool:
        """Send a request's frames by ZeroMQ (False when it could not go within the link's timeout); then check the
        end of the reply read before (see _end_reply). A DEALER blocks a send while it has no connection to queue on,
        as after a failed handshake (a CURVE judge and a client without its key) until it connects again, which may
        be never: its send timeout keeps the request's deadline."""
        sock = self.sock
        assert sock is not None  # requests check that the client is open
        try:
            if len(frames) == 1:
                raw_send(sock, frames[0])
            else:
                sock.send_multipart(frames)  # copied: pyzmq's zero-copy hands buffers to a collector thread
        except zmq.Again:
            return False
        if self._unended:
            self._end_reply(sock)
        return True

    def _receive(self, lane: LaneClient | None, timeout: float, read: Reader, parse: Parser) -> tuple[Any, Any] | None:
        """The next reply as ``(seq, reply)``, by the lane (``parse``) or by ZeroMQ (``read``); None when none came
        within ``timeout`` seconds."""
        if lane is not None:
            frames = lane.recv(timeout)
            return None if frames is None else parse(frames)
        sock = self.sock
        assert sock is not None  # requests check that the client is open
        ms = max(1, int(timeout * 1000))
        first = receive_first(sock, ms, self._rcvtimeo)
        self._rcvtimeo = ms
        if first is None:
            return None
        got = read(sock, first)
        self._unended = True
        return got

    def _end_reply(self, sock: zmq.Socket) -> None:
        """Raise ``malformed`` (dropping the rest) when the last reply read had frames after those its reader took.

        A binary reply's reader takes the frames its kind has and no more; this check waits until the next request
        went out, off the round trip (asking the socket costs several microseconds, as pyzmq resolves the option's
        enum in Python), so a judge's surplus frame is refused one request later.
        """
        self._unended = False
        if raw_get(sock, RCVMORE):
            drain(sock)
            raise P.ProtocolError("malformed", "the judge's reply had more frames than its kind has")

    def open(self, fields: dict, timeout: float | None = None) -> dict:
        """A client's first hello: the welcome, or the link closed and the refusal raised."""
        try:
            return self.hello(fields, timeout)
        except BaseException:
            self.close()
            raise

    def hello(self, fields: dict, timeout: float | None = None) -> dict:
        """Say hello (with ``fields``) and return the welcome; a judge that is busy or full is asked again when it
        says, while the time left allows."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        hello_id = {} if fields.get("k") is not None else {"h": secrets.token_hex(8)}  # a resent hello opens no second
        while True:
            left = deadline - time.monotonic()
            try:
                welcome = self.request({"t": "hello", "v": P.PROTOCOL_VERSION, **fields, **hello_id},
                                       timeout=max(left, 0.05))
            except RemoteError as err:
                wait = err.retry_after
                if err.code not in ("busy", "full") or wait is None or wait > deadline - time.monotonic():
                    raise
                time.sleep(wait + random.uniform(0.005, 0.05))
                continue
            self.seq = max(self.seq, int(welcome.get("last_seq", 0) or 0) + 1)
            self._open_lane(welcome.get("lane"))
            return welcome


class RemoteEnv(gym.Env):
    """A gymnasium env served by a judge at ``address`` (``tcp://host:port``).

    ``token`` resumes a session or acts for a pre-issued multi-agent body; without it a single-agent judge
    issues one with a fresh env instance (a multi-agent judge started with ``allow_claim`` gives the next free
    body, or ``body`` by name). ``secret`` is the judge's shared secret, ``timeout`` the seconds to wait for
    each reply, ``retries`` how many times to reconnect and resend before raising :class:`JudgeTimeout`,
    ``connect_timeout`` the time the handshake may take (waits for a busy judge included; default ``timeout``),
    ``heartbeat`` the seconds after which a dropped connection means the judge is gone,
    ``curve_server_key`` the judge's public CURVE key when it encrypts traffic, ``lane`` whether steps and
    resets may take the judge's same-host lane when it offers one (:mod:`~slm_lab_like.remote.lane`), and
    ``spin`` how many seconds to poll for a reply there before sleeping on it (a core's time for less latency; None,
    the default: :data:`~slm_lab_like.remote.lane.CLIENT_SPIN` for a judge in another process that answers within it).
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
        curve_server_key: bytes | str | None = None,
        heartbeat: float = HEARTBEAT,
        lane: bool = True,
        spin: float | None = None,
    ) -> None:
        self.address = address
        self.timeout = float(timeout)
        self._link = Link(address, timeout, retries, heartbeat, curve_server_key, lane, spin)
        self._closed = False
        self._hello = {"k": token, "body": body, "auth": secret}
        self._connect_timeout = connect_timeout
        welcome = self._link.open(dict(self._hello), connect_timeout)
        self._take(welcome)
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
        self._last_obs: Any = None
        self._setup_binary(welcome)

    def _take(self, welcome: dict) -> None:
        """Keep what a welcome says about this client's session."""
        self.token: str = welcome["k"]
        self.body: str | None = welcome.get("body")
        self.env_id: str = welcome.get("env", "")
        self._renewable = self._hello["k"] is None and welcome.get("server") == "single"

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
        if self._obs_frame and raw_recv_into is None:
            self._obs_frame = False  # no recv_into in this pyzmq: receive bytes and copy once

    def reconnect(self) -> None:
        """Drop the socket and open a new one to the same judge (the token keeps the session)."""
        self._link.reconnect()

    def _renew(self) -> None:
        """Say hello again after the judge forgot this client's session (it expired, or the judge restarted)."""
        welcome = self._link.hello(dict(self._hello), self._connect_timeout)
        self._take(welcome)
        if self._token_raw:
            self._token_raw = bytes.fromhex(self.token)

    # -- transport -------------------------------------------------------------------------
    def _request(self, header: dict, timeout: float | None = None, retries: int | None = None) -> dict:
        return self._link.request(header, timeout, retries)

    def _read_reply(self, sock: zmq.Socket, first: bytes) -> tuple[Any, Any]:
        """Read the rest of a reply whose first frame is ``first``; return ``(seq, reply)``.

        A binary reply becomes ``(tag, flags, reward, obs)`` with a fresh observation (received straight
        into a new array when it has its own frame: one copy); a msgpack reply becomes its header dict.
        """
        if first[:1] != b"\xc1":
            return read_msgpack(sock, first)
        codec = self._bin_obs
        if codec is None or len(first) < _REP_SIZE:
            drain(sock)
            raise P.ProtocolError("malformed", "unexpected binary reply")
        tag, flags, seq, reward = _REP_UNPACK(first)
        if flags & P.FLAG_OBS_FRAME:
            if len(first) != _REP_SIZE:
                drain(sock)
                raise P.ProtocolError("malformed", "binary reply with a misplaced observation")
            if self._obs_frame:
                empty = codec.empty
                assert empty is not None and raw_recv_into is not None  # framed: an array space, and recv_into
                obs = empty()
                size = raw_recv_into(sock, obs)
            else:
                data = raw_recv(sock)
                size = len(data)
                if size == codec.nbytes:
                    obs = codec.unpack(data, 0)
        else:
            size = len(first) - _REP_SIZE
            if size == codec.nbytes:
                obs = codec.unpack(first, _REP_SIZE)
        if size != codec.nbytes:
            drain(sock)
            raise P.ProtocolError("malformed", "binary reply of the wrong size for the observation space")
        return seq, (tag, flags, reward, obs)  # frames after these: refused by the link (Link._end_reply)

    def _parse_reply(self, frames: list[bytes]) -> tuple[Any, Any]:
        """``(seq, reply)`` of a reply's frames that came by the lane (as :meth:`_read_reply` makes them)."""
        first = frames[0]
        if first[:1] != b"\xc1":
            return parse_msgpack(frames)
        codec = self._bin_obs
        if codec is None or len(first) < _REP_SIZE:
            raise P.ProtocolError("malformed", "unexpected binary reply")
        tag, flags, seq, reward = _REP_UNPACK(first)
        framed = bool(flags & P.FLAG_OBS_FRAME)
        data, offset = (frames[-1], 0) if framed else (first, _REP_SIZE)
        if len(frames) != 1 + framed or len(data) - offset != codec.nbytes or (framed and len(first) != _REP_SIZE):
            raise P.ProtocolError("malformed", "binary reply of the wrong size for the observation space")
        return seq, (tag, flags, reward, codec.unpack(data, offset))

    # -- gymnasium API ---------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Reset the remote env; the seed is forwarded so the judge's episode reproduces."""
        super().reset(seed=seed)
        try:
            obs, info = self._reset(seed, options)
        except RemoteError as err:
            if err.code not in LOST_SESSION or not self._renewable:
                raise
            self._renew()
            obs, info = self._reset(seed, options)
        self._last_obs = obs
        return obs, info

    def _reset(self, seed: int | None, options: dict | None) -> tuple[Any, dict]:
        if self._bin_act is not None and options is None:
            if seed is None:
                reply = self._link.binary(P.BIN_RESET, 0, self._token_raw, b"", "reset", self._read_reply,
                                          self._parse_reply)
            elif type(seed) is int and 0 <= seed < 2**63:
                reply = self._link.binary(P.BIN_RESET, P.FLAG_SEED, self._token_raw, P.BIN_SEED.pack(seed), "reset",
                                          self._read_reply, self._parse_reply)
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
        try:
            result = self._step(action)
        except RemoteError as err:
            if err.code not in LOST_SESSION or not self._renewable:
                raise
            self._renew()
            return P.fresh_copy(self._last_obs), 0.0, False, True, {"reason": "session_expired"}
        self._last_obs = result[0]
        return result

    def _step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        codec = self._bin_act
        if codec is not None:
            payload = codec.pack(action)
            if payload is not None:
                reply = self._link.binary(P.BIN_STEP, 0, self._token_raw, payload, "step", self._read_reply,
                                          self._parse_reply)
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
        close_link(self._link, getattr(self, "token", None))
        super().close()


def close_link(link: Link, token: str | None) -> None:
    """Tell the judge a client is done (briefly: a gone judge is not waited for) and close its socket."""
    if link.sock is not None and token:
        try:
            link.request({"t": "close", "k": token}, timeout=min(link.timeout, 2.0), retries=0)
        except (JudgeTimeout, RemoteError, zmq.ZMQError, P.ProtocolError):
            pass
    link.close()


def _fresh_info(info: Any) -> dict:
    """Return the info map as a new dict whose arrays are writable copies."""
    if not info:
        return {}
    return {k: P.fresh_copy(v) for k, v in info.items()}
