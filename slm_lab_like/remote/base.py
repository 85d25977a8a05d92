"""What every judge shares: its loop over the transports, tokens, sequence numbers and retransmits, codecs, replies.

A judge subclass says who its clients are (:meth:`BaseJudge._admit`, :meth:`BaseJudge._welcome`) and what a
reset, a step, a close and a render do (:meth:`BaseJudge._reset`, :meth:`BaseJudge._step`,
:meth:`BaseJudge._close`, :meth:`BaseJudge._render_source`); this base turns every request, msgpack or binary,
into one of those calls and every failure into a typed error reply, so no request handling is written twice.
Single-agent, parallel and turn-based hosting then differ only in how they gather actions and when they answer.
Requests come by the ZeroMQ socket (:mod:`.transport`) or, from clients on the same host, by the lane (:mod:`.lane`);
both are served alike and each reply goes back the way its request came. Env names are resolved by the env registry
(:func:`~slm_lab_like.remote.names.hosting_for`), so every judge knows the names a spec knows.
"""

from __future__ import annotations

import hmac
import logging
import os
import select
import socket
import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Generic, Iterable, NoReturn, TypeVar

import numpy as np
import zmq

from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.lane import JUDGE_SPIN, LaneConn, LaneServer
from slm_lab_like.remote.names import hosting_for
from slm_lab_like.remote.options import curve_key
from slm_lab_like.remote.transport import RouterPort

logger = logging.getLogger(__name__)

_REQ_SIZE = P.BIN_REQ.size
_REQ_UNPACK = P.BIN_REQ.unpack_from
_BIN_STEP, _BIN_RESET, _BIN_VSTEP, _BIN_VRESET = P.BIN_STEP, P.BIN_RESET, P.BIN_VSTEP, P.BIN_VRESET
_REP_PACK, _STEP_REPLY, _RESET_REPLY = P.BIN_REP.pack, P.BIN_STEP_REPLY, P.BIN_RESET_REPLY

# The loop waits on ZeroMQ alone (a blocking receive) while no lane connection is open, except for LANE_WAIT seconds
# after a welcome that offered the lane (its client connects then); meanwhile it looks for a late lane connection
# every LANE_LOOK seconds.
LANE_WAIT, LANE_LOOK = 0.25, 0.05
# A hello without a token may carry an id (`h`, a client's random string): a resent hello with the same id gets the
# session the first one opened, not a second. The judge keeps the last HELLOS_KEPT ids.
HELLO_ID_MAX, HELLOS_KEPT = 64, 4096

EnvFactory = Callable[[], Any]
EpisodeCallback = Callable[[dict], None]
ActionDecoder = Callable[["Client", Any], Any]


def resolve_env_factory(entry: Any, **kwargs: Any) -> EnvFactory:
    """Turn an env name (any the env registry knows: gymnasium id, built-in game, ``"module:Attr"``), a spec env
    dict or a callable into a factory; EntryError (a ValueError) in one line for a name no judge can host."""
    if callable(entry) and not isinstance(entry, str):
        return (lambda: entry(**kwargs)) if kwargs else entry
    if isinstance(entry, dict):
        name = entry.get("name") or entry.get("id")
        merged = {**(entry.get("kwargs") or {}), **kwargs}
        return resolve_env_factory(name, **merged)
    if not isinstance(entry, str) or not entry:
        raise ValueError(f"cannot make an env from {entry!r}")
    return hosting_for(entry, kwargs).make


def check_bind_address(address: str, allow_remote: bool) -> None:
    """Refuse an address a judge cannot listen at as written (ValueError, one line), and to listen beyond loopback
    unless the caller explicitly allowed it (`--allow-remote`, `serve --host`, `allow_remote=True`)."""
    if not address.startswith(("tcp://", "ipc://", "inproc://")):
        raise ValueError(f"expected tcp://HOST:PORT (or ipc://PATH), got {address!r}")
    if address.startswith("tcp://"):
        host, port = P.tcp_host_port(address) or ("", "")
        if not host or not (port == "*" or port.isdigit() and int(port) <= 65535):
            raise ValueError(f"expected tcp://HOST:PORT with a port from 0 to 65535 (0: a free one), got {address!r}")
    if not P.is_loopback(address) and not allow_remote:
        raise ValueError(f"refusing to bind {address}: a judge listens on loopback only unless allowed to listen "
                         "beyond it (--allow-remote, serve --host, allow_remote=True)")


class Codec:
    """How one client's values travel: its spaces for the handshake, the msgpack observation encoder and action
    checker, and the binary codecs when both spaces have a fixed layout (``binary``)."""

    __slots__ = ("welcome", "obs_enc", "obs_dec", "act_check", "binary", "obs_pack", "obs_frame", "act_from",
                 "step_size")

    def __init__(self, observation_space: Any, action_space: Any) -> None:
        self.welcome: dict[str, Any] = {"obs_space": P.describe_space(observation_space),
                                        "act_space": P.describe_space(action_space)}
        self.obs_enc = P.make_value_encoder(observation_space)
        self.obs_dec = P.make_value_decoder(observation_space)  # the client's decoder: what it will make of a reply
        self.act_check = P.make_action_checker(action_space)
        obs_codec, act_codec = P.make_fixed_codec(observation_space), P.make_fixed_codec(action_space)
        # Without binary codecs no binary request is served (_handle_binary refuses it), so these are never called.
        self.obs_pack: Callable[[Any], bytes | None] = _no_binary
        self.act_from: Callable[[bytes, int], Any] = _no_binary
        self.obs_frame, self.step_size = 0, 0
        self.binary = obs_codec is not None and act_codec is not None
        if obs_codec is not None and act_codec is not None:
            self.obs_pack, self.act_from = obs_codec.pack, act_codec.check
            self.obs_frame = P.FLAG_OBS_FRAME if obs_codec.nbytes > P.BIN_INLINE_OBS_BYTES else 0
            self.step_size = _REQ_SIZE + act_codec.nbytes
            self.welcome["bin"] = 1


def _no_binary(*args: Any) -> NoReturn:
    raise P.ProtocolError("malformed", "this judge takes no binary requests")


class Client:
    """One token's wire state: its codec, the last sequence number answered and that reply (for retransmits)."""

    __slots__ = ("token", "codec", "last_seq", "last_reply", "last_active")

    def __init__(self, token: str, codec: Codec, now: float = 0.0) -> None:
        self.token = token
        self.codec = codec
        self.last_seq = -1
        self.last_reply: list[Any] | None = None
        self.last_active = now


class Request:
    """A request to answer, now or later: where the reply goes, its sequence number, whether it came binary."""

    __slots__ = ("envelope", "seq", "binary")

    def __init__(self, envelope: list[bytes], seq: int, binary: bool) -> None:
        self.envelope = envelope
        self.seq = seq
        self.binary = binary


def msgpack_action(client: Client, wire: Any) -> Any:
    """The action of a msgpack step request, checked against the client's action space."""
    return client.codec.act_check(wire)


def binary_action(client: Client, frame: bytes) -> Any:
    """The action of a binary step frame, checked against the client's action space."""
    if len(frame) != client.codec.step_size:
        raise P.ProtocolError("malformed", "binary step of the wrong size for the action space")
    return client.codec.act_from(frame, _REQ_SIZE)


def binary_seed(frame: bytes, flags: int) -> int | None:
    """The seed of a binary reset frame (None without :data:`~protocol.FLAG_SEED`)."""
    if not flags & P.FLAG_SEED:
        if len(frame) != _REQ_SIZE:
            raise P.ProtocolError("malformed", "binary reset of the wrong size")
        return None
    if len(frame) != _REQ_SIZE + P.BIN_SEED.size:
        raise P.ProtocolError("malformed", "binary reset of the wrong size")
    return check_seed(P.BIN_SEED.unpack_from(frame, _REQ_SIZE)[0])


def check_seed(value: Any) -> int | None:
    """A reset seed from the wire: a non-negative int up to protocol.MAX_SEED, or None."""
    if value is None:
        return None
    if type(value) is not int or not 0 <= value <= P.MAX_SEED:
        raise P.ProtocolError("malformed", "seed must be a non-negative integer or nil")
    return value


ClientT = TypeVar("ClientT", bound=Client)


class BaseJudge(Generic[ClientT]):
    """Socket, loop, request handling and safety net shared by the single- and multi-agent judges.

    ``episode_seeds`` (optional) makes the judge choose every episode's seed in order, ignoring client seeds
    and refusing resets once they run out; ``episode_callback`` receives a data-only record of each episode.
    A judge bound to loopback (or ipc) also offers same-host clients a lane (:mod:`~slm_lab_like.remote.lane`)
    unless ``lane=False`` or its traffic is encrypted (CURVE: nothing travels in the clear, not even locally);
    ``spin`` (seconds) keeps it polling that long after each request by the lane instead of sleeping at once,
    which trades a core's time for the latency of the next request (for a judge with a core of its own); 0 never
    spins, and None (the default) spins :data:`~slm_lab_like.remote.lane.JUDGE_SPIN` after answering a client in
    another process whose last request came within that time of the answer before it (one stepping in a loop).
    """

    kind = "base"
    render_mode: str | None = None

    def __init__(
        self,
        address: str = "tcp://127.0.0.1:0",
        *,
        secret: str | None = None,
        allow_remote: bool = False,
        max_message_bytes: int = P.DEFAULT_MAX_MESSAGE_BYTES,
        curve_secret_key: bytes | str | None = None,
        episode_seeds: Iterable[int] | None = None,
        episode_callback: EpisodeCallback | None = None,
        lane: bool = True,
        spin: float | None = None,
    ) -> None:
        check_bind_address(address, allow_remote)
        self.secret = secret
        self.max_message_bytes = int(max_message_bytes)
        self._seeds = iter(list(episode_seeds)) if episode_seeds is not None else None
        self.episode_callback = episode_callback
        self._clients: dict[str, ClientT] = {}
        self._raw_clients: dict[bytes, ClientT] = {}
        self._hellos: OrderedDict[str, str] = OrderedDict()  # a hello's id (`h`) -> the token it was given
        key = curve_key(curve_secret_key)
        self.curve_public_key: str | None = zmq.curve_public(key).decode() if key is not None else None
        self._port = RouterPort(address, self.max_message_bytes, key)
        self.address: str = self._port.address
        same_host = P.is_loopback(self.address) and hasattr(socket, "AF_UNIX")
        self._lane = LaneServer(self.max_message_bytes) if lane and same_host and key is None else None
        self._stop = threading.Event()
        self.spin = None if spin is None else float(spin)
        self._spin_until = 0.0  # monotonic time until which the loop polls without sleeping (0: it sleeps)
        self._lane_due = 0.0  # until when a client told of the lane may connect to it (the loop watches the lane)
        self._lane_looked = 0.0  # when the loop waiting on ZeroMQ alone last looked for a lane connection
        self._thread: threading.Thread | None = None
        self._closed = False
        self.errors_sent = 0

    # -- loop ------------------------------------------------------------------------------
    def run(self) -> None:
        """Serve requests until :meth:`stop` is called (blocking). One loop: while no lane connection is open (or
        coming: a client was just told of the lane) it waits on ZeroMQ alone, and looks for a lane connection every
        LANE_LOOK seconds; otherwise it waits on the lane's sockets and ZeroMQ's at once (:meth:`_poll_turn`)."""
        lane, stopped, monotonic = self._lane, self._stop.is_set, time.monotonic
        poller = select.poll()
        zfd = self._port.fileno()
        poller.register(zfd, select.POLLIN)
        listener = -1
        if lane is not None:
            lane.attach(poller)
            listener = lane.listener.fileno()
        try:
            while not stopped():
                if lane is None or not lane.conns and monotonic() >= self._lane_due:
                    self._zmq_turn()
                    now = monotonic()
                    if lane is not None and now - self._lane_looked >= LANE_LOOK:
                        self._lane_looked = now
                        lane.accept()
                    self._tick(now)
                    continue
                self._poll_turn(lane, poller, zfd, listener)
                self._tick(monotonic())
        finally:
            self._shutdown()

    def _zmq_turn(self) -> None:
        """Wait for a ZeroMQ request until the next timer is due (at most 0.1 s) and serve it."""
        msg = self._port.receive(self._wait_ms())
        if msg is not None:
            self._dispatch(msg)

    def _wait_ms(self) -> int:
        """How long the loop may sleep: until the next timer is due, from 1 ms to 0.1 s."""
        return max(1, min(100, int(self._next_wakeup() * 1000)))

    def _poll_turn(self, lane: LaneServer, poller: Any, zfd: int, listener: int) -> None:
        """Wait on the lane's sockets (``listener`` its listening one) and the ZeroMQ socket's file descriptor (which
        only says that ZeroMQ's state may have changed: the socket is drained, and asked before each wait) and serve
        what is ready."""
        port = self._port
        if port.stale and port.waiting():  # asked as the last ZeroMQ call before any sleep (transport.py)
            self._drain()
            ready = poller.poll(0)  # the lanes get their turn, then ZeroMQ is asked again
        else:
            port.stale = False
            spun = self._spin(poller) if self._spin_until else None
            ready = spun or poller.poll(self._wait_ms())
        for fd, events in ready:
            if fd == zfd:
                port.stale = True
                continue
            if fd == listener:
                lane.accept()
                continue
            conn = lane.conns.get(fd)
            if conn is not None and events & select.POLLOUT:
                lane.flush(conn)
            if conn is not None and events & (select.POLLIN | select.POLLHUP | select.POLLERR):
                lane.read(conn, self._serve_frames)

    def _drain(self, limit: int = 256) -> None:
        """Serve the requests waiting on the ZeroMQ socket (at most ``limit``, so lanes get their turn)."""
        port = self._port
        for _ in range(limit):
            if not port.waiting():
                return
            self._dispatch(port.take())

    def _spin(self, poller: Any) -> list:
        """Poll without sleeping until something is ready or the spin's deadline passed (``spin`` seconds after the
        last request by the lane, or a judge's own reason: a core that sleeps between requests wakes slowly); then
        the loop sleeps again."""
        monotonic, until, give_way = time.monotonic, self._spin_until, os.sched_yield
        ready = poller.poll(0)
        while not ready and monotonic() < until:
            give_way()  # other work on this core goes first: the spin only takes time nobody else wants
            ready = poller.poll(0)
        if not ready:
            self._spin_until = 0.0
        return ready

    def _spin_for(self, seconds: float) -> None:
        """Keep the loop polling without sleeping for ``seconds`` from now (bounded: then it sleeps)."""
        self._spin_until = max(self._spin_until, time.monotonic() + seconds)

    def _serve_frames(self, conn: LaneConn, frames: list[bytes]) -> None:
        """Serve a request that came by the lane (its reply goes back the same way)."""
        now = time.monotonic()
        if self.spin is None and conn.answered:
            conn.brisk = now - conn.answered < JUDGE_SPIN
        self._serve([conn], frames)
        conn.answered = now = time.monotonic()
        if self.spin:
            self._spin_for(self.spin)
        elif self.spin is None and conn.brisk and conn.other:
            self._spin_until = max(self._spin_until, now + JUDGE_SPIN)

    def start(self) -> str:
        """Run the loop in a daemon thread and return the bound address."""
        self._thread = threading.Thread(target=self.run, name=f"judge-{self.address}", daemon=True)
        self._thread.start()
        return self.address

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop, close the env(s) and the socket."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        elif self._thread is None:
            self._shutdown()

    def _shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._close_envs()
        finally:
            self._port.close()
            if self._lane is not None:
                self._lane.close()

    # -- dispatch --------------------------------------------------------------------------
    def _dispatch(self, msg: list[bytes]) -> None:
        envelope: list[Any] = [msg[0]]
        frames = msg[1:]
        if len(frames) >= 2 and not frames[0]:
            envelope.append(b"")
            frames = frames[1:]
        self._serve(envelope, frames)

    def _serve(self, envelope: list[Any], frames: list[bytes]) -> None:
        """Serve one request whose reply goes to ``envelope`` (ZeroMQ routing frames, or a lane connection)."""
        seq = None
        try:
            if frames[0][:1] == b"\xc1":
                frame = self._binary_frame(frames)
                tag, flags, seq, token = _REQ_UNPACK(frame)
                self._handle_binary(envelope, frame, tag, flags, seq, token, time.monotonic())
            else:
                header = P.decode(frames, self.max_message_bytes)
                seq = header.get("s")
                self._handle(envelope, header, time.monotonic())
        except P.ProtocolError as exc:
            self._send_error(envelope, exc.code, exc.message, seq, exc.retry_after)
        except Exception as exc:
            logger.exception("judge: internal error while handling a request")
            self._send_error(envelope, "internal", f"{type(exc).__name__}", seq)

    def _binary_frame(self, frames: list[bytes]) -> bytes:
        """The one frame of a binary request, checked for size."""
        if len(frames) == 1 and _REQ_SIZE <= len(frames[0]) <= self.max_message_bytes:
            return frames[0]  # the common case, asked first
        total = sum(map(len, frames))
        if total > self.max_message_bytes:
            raise P.ProtocolError("too_large", f"message of {total} bytes exceeds the limit of "
                                               f"{self.max_message_bytes}")
        if len(frames) != 1:
            raise P.ProtocolError("malformed", "a binary request is a single frame")
        if len(frames[0]) < _REQ_SIZE:
            raise P.ProtocolError("malformed", "binary request shorter than its header")
        return frames[0]

    def _handle(self, envelope: list[bytes], header: dict, now: float) -> None:
        """Serve one msgpack request, its fields checked against the protocol's declaration (protocol.REQUESTS)."""
        kind = P.check_request(header)
        if kind == "hello":
            self._on_hello(envelope, header, now)
            return
        client = self._known(header["k"], now)
        seq = header.get("s")  # echoed by ping, close and render
        retry = header.get("retry") is True
        if kind == "step":
            if self._fresh_seq(client, header["s"], retry, envelope, "step"):
                self._step(client, Request(envelope, header["s"], False), msgpack_action, header["a"], now)
        elif kind == "reset" or kind == "vreset":
            self._on_reset(client, envelope, header, now, kind)
        elif kind == "vstep":
            if self._fresh_seq(client, header["s"], retry, envelope, "step"):
                self._vector_step(client, Request(envelope, header["s"], False), header["a"], now)
        elif kind == "ping":
            self._send(envelope, {"t": "pong", "s": seq, "time": time.time()})
        elif kind == "close":
            self._close(client, now)
            self._send(envelope, {"t": "closed", "s": seq})
        else:
            self._send(envelope, {"t": "render", "s": seq, "f": self._frame(client)})

    def _handle_binary(self, envelope: list[bytes], frame: bytes, tag: bytes, flags: int, seq: int,
                       token: bytes, now: float) -> None:
        """Serve a binary step or reset with the same checks and bookkeeping as the msgpack ones."""
        client = self._raw_clients.get(token)
        if client is None:
            self._unknown(token.hex())
        self._touch(client, now)
        if not client.codec.binary:
            raise P.ProtocolError("malformed", "this judge takes no binary requests")
        is_step = tag == _BIN_STEP or tag == _BIN_VSTEP
        if not is_step and tag != _BIN_RESET and tag != _BIN_VRESET:
            raise P.ProtocolError("unknown_type", "unknown binary request type")
        if (seq <= client.last_seq or flags & P.FLAG_RETRY) and not self._fresh_seq(
                client, seq, bool(flags & P.FLAG_RETRY), envelope, "step" if is_step else "reset"):
            return
        req = Request(envelope, seq, True)
        if tag == _BIN_STEP:
            self._step(client, req, binary_action, frame, now)
        elif tag == _BIN_RESET:
            self._reset(client, req, binary_seed(frame, flags), None, now)
        elif tag == _BIN_VSTEP:
            self._vector_step(client, req, frame, now)
        else:
            self._vector_reset(client, req, binary_seed(frame, flags), None, now)

    def _on_hello(self, envelope: list[bytes], header: dict, now: float) -> None:
        """Check the version and secret, admit the client (or resume its token) and send the welcome."""
        if header["v"] != P.PROTOCOL_VERSION:  # an int (check_request): 1.0 and true are not 1
            raise P.ProtocolError("bad_version", f"judge speaks protocol version {P.PROTOCOL_VERSION}")
        if self.secret is not None:
            given = header.get("auth")
            if not isinstance(given, str) or not hmac.compare_digest(given.encode(), self.secret.encode()):
                raise P.ProtocolError("auth_failed", "missing or wrong shared secret")
        client = self._known(header["k"], now) if header.get("k") is not None else self._admit_once(header, now)
        lane = {"lane": self._lane.path} if self._lane is not None else {}
        if lane:
            self._lane_due = now + LANE_WAIT
        self._send(envelope, {"t": "welcome", "v": P.PROTOCOL_VERSION, "server": self.kind, **self._welcome(client),
                              **client.codec.welcome, **lane, "k": client.token, "s": header.get("s"),
                              "last_seq": self._seen_seq(client)})
        self._welcomed(client, now)

    def _on_reset(self, client: ClientT, envelope: list[bytes], header: dict, now: float, kind: str) -> None:
        if not self._fresh_seq(client, header["s"], header.get("retry") is True, envelope, "reset"):
            return
        wire_seed = header.get("seed")
        seed: int | None = None
        seeds: list[int | None] | None = None
        if kind == "vreset" and type(wire_seed) is list and len(wire_seed) <= 65536:
            seeds = [check_seed(one) for one in wire_seed]
        else:
            seed = check_seed(wire_seed)
        options = header.get("opt")
        if kind == "reset":
            self._reset(client, Request(envelope, header["s"], False), seed, options, now)
        else:
            self._vector_reset(client, Request(envelope, header["s"], False), seed if seeds is None else seeds,
                               options, now)

    def _frame(self, client: ClientT) -> np.ndarray:
        """The rgb_array frame of the env the client plays in (``render_unavailable`` when there is none)."""
        env = self._render_source(client)
        if self.render_mode != "rgb_array" or env is None:
            raise P.ProtocolError("render_unavailable", "the judge's env renders no rgb_array (or no episode runs)")
        try:
            frame = env.render()
        except Exception as exc:
            raise P.ProtocolError("env_error", f"env.render failed: {type(exc).__name__}") from None
        if not isinstance(frame, np.ndarray):
            raise P.ProtocolError("render_unavailable", "the env returned no frame")
        return frame

    # -- clients and sequence numbers ------------------------------------------------------
    def _add_client(self, client: ClientT) -> None:
        self._clients[client.token] = client
        self._raw_clients[bytes.fromhex(client.token)] = client

    def _remove_client(self, client: ClientT) -> None:
        self._clients.pop(client.token, None)
        self._raw_clients.pop(bytes.fromhex(client.token), None)

    def _known(self, token: Any, now: float) -> ClientT:
        """The client holding ``token`` (``unknown_token`` otherwise), marked as heard from now."""
        client = self._clients.get(token) if isinstance(token, str) else None
        if client is None:
            self._unknown(token)
        self._touch(client, now)
        return client

    def _unknown(self, token: Any) -> NoReturn:
        """Refuse a request whose token names no client (``unknown_token``; a judge may say more)."""
        raise P.ProtocolError("unknown_token", "unknown or missing token")

    def _touch(self, client: ClientT, now: float) -> None:
        client.last_active = now

    def _fresh_seq(self, client: ClientT, seq: int, retry: bool, envelope: list[bytes], kind: str) -> bool:
        """True for a new sequence number; False when a retry was answered from the last reply (or re-aimed at
        a pending request); ``duplicate_<kind>`` for an old one."""
        if retry and self._reaim(client, seq, envelope):
            return False
        if seq <= client.last_seq:
            if retry and seq == client.last_seq and client.last_reply is not None:
                self._send_frames(envelope, client.last_reply)
                return False
            raise P.ProtocolError(f"duplicate_{kind}", f"sequence number {seq} was already used")
        return True

    # -- replies ---------------------------------------------------------------------------
    def _reply(self, client: Client, req: Request, kind: str, obs: Any, info: Any, reward: float = 0.0,
               terminated: bool = False, truncated: bool = False) -> None:
        """Answer a reset or step: binary frames to a binary request when the observation has its exact wire form
        and the info is empty, a msgpack header otherwise (``env_error`` when the observation is not one of its
        space: the client would fail to read it); the reply is kept for retransmits."""
        codec, seq = client.codec, req.seq
        if seq > client.last_seq:
            client.last_seq = seq
        client.last_reply = None  # until this reply is built: a retry must never get an older one
        if req.binary and not info:
            data = codec.obs_pack(obs)
            if data is not None:
                head = _REP_PACK(_STEP_REPLY if kind == "step" else _RESET_REPLY,
                                 terminated | (truncated << 1) | codec.obs_frame, seq, reward)
                client.last_reply = frames = [head, data] if codec.obs_frame else [head + data]
                self._send_frames(req.envelope, frames)
                return
        wire = codec.obs_enc(obs)
        try:
            codec.obs_dec(wire)
        except P.ProtocolError as err:  # the env broke its own observation space: its client hears so, nobody else
            self.errors_sent += 1
            client.last_reply = frames = P.encode(P.error_header(
                "env_error", f"env.{kind} returned an observation outside its observation space: {err.message}", seq))
            self._send_frames(req.envelope, frames)
            return
        header = {"t": kind, "s": seq, "o": wire, "i": P.sanitize_info(info) if info else {}}
        if kind == "step":
            header["r"], header["te"], header["tr"] = reward, terminated, truncated
        client.last_reply = frames = P.encode(header)
        self._send_frames(req.envelope, frames)

    def _send(self, envelope: list[bytes], header: dict) -> list[Any]:
        frames = P.encode(header)
        self._send_frames(envelope, frames)
        return frames

    def _send_frames(self, envelope: list[Any], frames: list[Any]) -> None:
        """Send a reply's frames the way its request came: a lane connection, or ZeroMQ routing frames."""
        if type(envelope[0]) is LaneConn:
            assert self._lane is not None  # a request came by the lane
            self._lane.send(envelope[0], frames)
            return
        self._port.send(envelope, frames)

    def _send_error(self, envelope: list[bytes], code: str, message: str, seq: Any = None,
                    retry_after: float | None = None) -> None:
        self.errors_sent += 1
        try:
            self._send(envelope, P.error_header(code, message, seq, retry_after))
        except zmq.ZMQError:
            pass

    # -- episodes --------------------------------------------------------------------------
    def _episode_seed(self, requested: int | None) -> int | None:
        """The seed of a new episode: the client's, or the judge's next one (``episode_limit`` when spent)."""
        if self._seeds is None:
            return requested
        seed = next(self._seeds, None)
        if seed is None:
            raise P.ProtocolError("episode_limit", "this judge allows no more episodes")
        return seed

    def _report(self, record: dict) -> None:
        """Hand a finished episode's record to the episode callback (a failing callback is only logged)."""
        if self.episode_callback is None:
            return
        try:
            self.episode_callback(record)
        except Exception:
            logger.exception("judge: episode callback failed")

    # -- hooks -----------------------------------------------------------------------------
    def _admit_once(self, header: dict, now: float) -> ClientT:
        """The client of a hello without a token: the one admitted for the same hello id `h` (a resent hello, maybe
        from a new connection) while its session lives, else a new one."""
        hello_id = header.get("h")
        if not (isinstance(hello_id, str) and 0 < len(hello_id) <= HELLO_ID_MAX):
            return self._admit(header, now)
        token = self._hellos.get(hello_id)
        if token is not None and token in self._clients:
            return self._known(token, now)
        client = self._admit(header, now)
        self._hellos[hello_id] = client.token
        while len(self._hellos) > HELLOS_KEPT:
            self._hellos.popitem(last=False)
        return client

    def _admit(self, header: dict, now: float) -> ClientT:
        """A new client for a hello without a token."""
        raise NotImplementedError

    def _welcome(self, client: ClientT) -> dict:
        """The judge's own welcome fields for ``client`` (env, body, render mode, ...)."""
        raise NotImplementedError

    def _welcomed(self, client: ClientT, now: float) -> None:
        """Called after a client's welcome went out."""

    def _seen_seq(self, client: ClientT) -> int:
        """The highest sequence number this client has used (answered or pending): a resuming client goes on
        from the next one."""
        return client.last_seq

    def _reaim(self, client: ClientT, seq: int, envelope: list[bytes]) -> bool:
        """Send the reply of a still-pending request ``seq`` to ``envelope``; False when none is pending."""
        return False

    def _reset(self, client: ClientT, req: Request, seed: int | None, options: dict | None, now: float) -> None:
        raise NotImplementedError

    def _step(self, client: ClientT, req: Request, decode: ActionDecoder, wire: Any, now: float) -> None:
        """Serve a step; ``decode(client, wire)`` checks and returns the action (call it after the state checks)."""
        raise NotImplementedError

    def _close(self, client: ClientT, now: float) -> None:
        raise NotImplementedError

    def _vector_reset(self, client: ClientT, req: Request, seed: int | list[int | None] | None, options: dict | None,
                      now: float) -> None:
        """Reset every copy of a vector session: copy i with ``seed + i`` (an int), ``seed[i]`` (a list, one a copy)
        or its own RNG (None); ``unsupported`` where the judge hosts none."""
        raise P.ProtocolError("unsupported", "this judge hosts no vector sessions")

    def _vector_step(self, client: ClientT, req: Request, wire: Any, now: float) -> None:
        """Step every copy of a vector session: ``wire`` is a binary frame or a msgpack action array."""
        raise P.ProtocolError("unsupported", "this judge hosts no vector sessions")

    def _render_source(self, client: ClientT) -> Any:
        """The env whose frame ``client`` sees, or None when there is none now."""
        return None

    def _next_wakeup(self) -> float:
        return 0.1

    def _tick(self, now: float) -> None:
        return None

    def _close_envs(self) -> None:
        return None
