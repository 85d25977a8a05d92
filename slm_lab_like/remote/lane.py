"""The same-host lane: a Unix domain socket beside a judge's ZeroMQ socket, carrying the same messages.

Over ZeroMQ a round trip wakes six threads (each side's I/O thread and application thread); on a machine whose
cores are busy every wake-up waits for a core, and a round trip costs hundreds of microseconds. A stream socket
wakes two. A judge bound to loopback (or ipc) opens a lane and names it in the welcome; a client on the same host
connects to it and sends its binary requests there (anything else may travel there too), and falls back to ZeroMQ
when the lane is not there or breaks. On Linux the lane has an unguessable name in the abstract namespace, so
nothing of it is left on disk even when the judge is killed, and only processes of the judge's own user (or root)
are let in (``SO_PEERCRED``); elsewhere it is a socket in a fresh directory only that user can enter. Every
request still carries its token and sequence number and is checked exactly as on ZeroMQ; the ZeroMQ connection
stays open, so its heartbeats still tell a client when the judge is gone.

A message is ``u32 length`` then its body: ``u16 count``, ``count`` frame lengths (u32) and the frames, i.e. the
frames of a ZeroMQ message. The judge never blocks on a lane: sockets are non-blocking, each connection's input
and output are buffered within limits, and a connection that breaks the framing or the limits is closed.
"""
from __future__ import annotations

import logging
import os
import secrets
import select
import shutil
import socket
import struct
import sys
import tempfile
import time
from typing import Any, Callable

logger = logging.getLogger(__name__)

POLLIN, POLLOUT = select.POLLIN, select.POLLOUT
_LEN = struct.Struct("<I")
_COUNT = struct.Struct("<H")
_ONE_FRAME = struct.Struct("<IHI")  # the head of a one-frame message: body length, count 1, frame length
MAX_FRAMES = 64
_CHUNK = 65536
MAX_CONNECTIONS = 1024
CLIENT_SPIN = 0.0005
"""Seconds a client polls for a reply by default before it sleeps on it: a judge in another process normally answers
within tens of microseconds plus its own wake-up, and a client that slept pays a second wake-up (a core's time only
while a request is out; a judge that answers later than this is not spun for until it answers faster)."""
JUDGE_SPIN = 0.001
"""Seconds a judge polls by default for a connection's next request after answering it, when that connection's last
request came within this time of the answer before it (a client stepping in a loop): a sleeping judge wakes slowly.
A client that pauses longer gets no spin, and an idle judge sleeps."""
ABSTRACT = sys.platform.startswith("linux")
"""Whether lanes are named in Linux's abstract socket namespace (no file; the name goes with the last socket)."""
_PEERCRED = struct.Struct("3i")


def peer_cred(sock: socket.socket) -> tuple[int, int] | None:
    """The process id and user id of a connected Unix socket's peer (None where the OS does not say)."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    try:
        pid, uid, _ = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, opt, _PEERCRED.size))
    except (OSError, struct.error):
        return None
    return pid, uid


def other_process(sock: socket.socket) -> bool:
    """Whether the peer of a connected Unix socket is another process (False where the OS does not say): spinning
    for a peer in this process would only hold the GIL it needs."""
    cred = peer_cred(sock)
    return cred is not None and cred[0] > 0 and cred[0] != os.getpid()


def own_user(sock: socket.socket) -> bool:
    """Whether the peer of a connected Unix socket runs as this process's user or as root: an abstract lane has no
    file permissions, so this is what keeps other users out (a peer whose credentials the OS does not give is not
    let in)."""
    cred = peer_cred(sock)
    return cred is not None and cred[1] in (os.getuid(), 0)


def pack(frames: list[Any]) -> bytes:
    """One lane message holding ``frames`` (bytes or buffers)."""
    if len(frames) == 1 and type(frames[0]) is bytes:
        frame = frames[0]
        return _ONE_FRAME.pack(6 + len(frame), 1, len(frame)) + frame
    data = [bytes(f) if type(f) is not bytes else f for f in frames]
    head = _COUNT.pack(len(data)) + struct.pack(f"<{len(data)}I", *map(len, data))
    body_len = len(head) + sum(map(len, data))
    return b"".join([_LEN.pack(body_len), head, *data])


def unpack(body: bytes | bytearray | memoryview) -> list[bytes]:
    """The frames of a message body; ValueError when its layout is broken."""
    if len(body) < 2:
        raise ValueError("lane message shorter than its frame count")
    (count,) = _COUNT.unpack_from(body, 0)
    if not 1 <= count <= MAX_FRAMES or len(body) < 2 + 4 * count:
        raise ValueError("bad lane frame count")
    lengths = struct.unpack_from(f"<{count}I", body, 2)
    offset = 2 + 4 * count
    if offset + sum(lengths) != len(body):
        raise ValueError("lane frame lengths do not add up")
    frames = []
    for n in lengths:
        frames.append(bytes(body[offset:offset + n]))
        offset += n
    return frames


class LaneConn:
    """One client's lane connection on the judge's side: its socket and its input and output buffers."""

    __slots__ = ("sock", "fd", "inbox", "outbox", "closed", "writing", "other", "answered", "brisk")

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.fd = sock, sock.fileno()
        self.inbox, self.outbox = bytearray(), bytearray()
        self.closed = self.writing = False
        self.other = other_process(sock)  # default spins only for a client in another process
        self.answered = 0.0  # monotonic time of the last answer (0: none yet)
        self.brisk = False  # whether its last request came within JUDGE_SPIN of the answer before it


class LaneServer:
    """The judge's end of the lane: a listening Unix socket and its connections, multiplexed by the judge's loop
    through ``poller`` (a ``select.poll`` object), whose registrations it keeps: reading every connection, and
    writing to those whose output waits."""

    def __init__(self, max_message_bytes: int) -> None:
        self.max_body = 4 * max_message_bytes + 4096
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.dir: str | None = None
        if ABSTRACT:
            self.path = "\0judge-lane-" + secrets.token_hex(16)
        else:
            self.dir = tempfile.mkdtemp(prefix="judge-lane-")
            os.chmod(self.dir, 0o700)
            self.path = os.path.join(self.dir, "lane")
        self.listener.bind(self.path)
        self.listener.listen(128)
        self.listener.setblocking(False)
        self.conns: dict[int, LaneConn] = {}
        self.poller: Any = None

    def attach(self, poller: Any) -> None:
        """Let ``poller`` wait on the listener and on every connection."""
        self.poller = poller
        poller.register(self.listener.fileno(), POLLIN)

    def accept(self) -> LaneConn | None:
        """A new connection (None when none waits, when too many are open, or when an abstract lane's peer is another
        user's process)."""
        try:
            sock, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return None
        if len(self.conns) >= MAX_CONNECTIONS or (self.dir is None and not own_user(sock)):
            sock.close()
            return None
        sock.setblocking(False)
        conn = LaneConn(sock)
        self.conns[conn.fd] = conn
        self.poller.register(conn.fd, POLLIN)
        return conn

    def read(self, conn: LaneConn, handle: Callable[[LaneConn, list[bytes]], None]) -> None:
        """Read what the connection sent and hand each complete message's frames to ``handle``."""
        data: bytes | bytearray
        try:
            data = conn.sock.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.drop(conn)
            return
        inbox = conn.inbox
        if not inbox and len(data) >= 10 and data[4:6] == b"\x01\x00":  # the common case: one whole one-frame message
            size, frame_len = _LEN.unpack_from(data, 0)[0], _LEN.unpack_from(data, 6)[0]
            if size == len(data) - 4 and frame_len == size - 6 and size <= self.max_body:
                handle(conn, [data[10:]])
                return
        if inbox:
            inbox += data
            data = inbox
        start = 0
        while len(data) - start >= 4 and not conn.closed:
            (size,) = _LEN.unpack_from(data, start)
            if size > self.max_body:
                self.drop(conn)
                return
            if len(data) - start < 4 + size:
                break
            try:
                frames = unpack(memoryview(data)[start + 4:start + 4 + size])
            except ValueError:
                self.drop(conn)
                return
            start += 4 + size
            handle(conn, frames)
        conn.inbox = bytearray(data[start:]) if start < len(data) else bytearray()

    def send(self, conn: LaneConn, frames: list[Any]) -> None:
        """Send a message, keeping what the socket does not take now for :meth:`flush`."""
        if conn.closed:
            return
        if not conn.outbox:  # the common case: nothing waits, so the message goes straight to the socket
            data = pack(frames)
            try:
                sent = conn.sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self.drop(conn)
                return
            if sent == len(data):
                return
            conn.outbox += memoryview(data)[sent:]
            if len(conn.outbox) > 2 * self.max_body:  # a client that does not read its replies
                self.drop(conn)
                return
            self.flush(conn)
            return
        conn.outbox += pack(frames)
        if len(conn.outbox) > 2 * self.max_body:  # a client that does not read its replies
            self.drop(conn)
            return
        self.flush(conn)

    def flush(self, conn: LaneConn) -> None:
        """Write what the connection's socket takes of its output."""
        try:
            sent = conn.sock.send(conn.outbox)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self.drop(conn)
            return
        del conn.outbox[:sent]
        if conn.writing != bool(conn.outbox):
            conn.writing = bool(conn.outbox)
            self.poller.register(conn.fd, POLLIN | (POLLOUT if conn.writing else 0))

    def drop(self, conn: LaneConn) -> None:
        """Close a connection."""
        if not conn.closed:
            conn.closed = True
            self.conns.pop(conn.fd, None)
            self.poller.unregister(conn.fd)
            conn.sock.close()

    def close(self) -> None:
        """Close every connection and the listener (which frees an abstract name), and remove the lane's directory
        where it has one."""
        for conn in list(self.conns.values()):
            self.drop(conn)
        self.listener.close()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)


class LaneClient:
    """A client's end of the lane: a connected, non-blocking Unix socket, one request at a time; ``spin`` (seconds)
    is how long it polls for a reply without sleeping before it sleeps on it (0: never; None: :data:`CLIENT_SPIN`
    when the judge is another process, skipped while the judge's replies come later than that)."""

    def __init__(self, path: str, spin: float | None = None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.connect(path)
        except OSError:
            self.sock.close()
            raise
        self.sock.setblocking(False)
        self.adaptive = spin is None
        self.spin = (CLIENT_SPIN if other_process(self.sock) else 0.0) if spin is None else float(spin)
        self._late = 0  # replies in a row that came after an adaptive spin would have ended
        self._poll = select.poll()
        self._poll.register(self.sock, select.POLLIN)
        self._rest = b""

    def send(self, frame: bytes) -> None:
        """Send a one-frame message."""
        data = _ONE_FRAME.pack(6 + len(frame), 1, len(frame)) + frame
        try:
            sent = self.sock.send(data)
        except BlockingIOError:
            sent = 0
        rest = memoryview(data)[sent:]
        while rest:
            select.select([], [self.sock], [], 1.0)
            try:
                rest = rest[self.sock.send(rest):]
            except BlockingIOError:
                pass

    def recv(self, timeout: float) -> list[bytes] | None:
        """The frames of the next message; None when it is not all there within ``timeout`` seconds (what came is
        kept for the next call); OSError when the lane broke (the judge closed it)."""
        data, sock, poll = self._rest, self.sock, self._poll.poll
        start = time.monotonic()
        spin = self.spin if self._late < 4 and len(data) < 4 else 0.0
        ready = False
        if spin:
            until = start + spin
            while not (ready := bool(poll(0))) and time.monotonic() < until:
                os.sched_yield()  # other work on this core goes first
        while len(data) < 4 or len(data) < 4 + _LEN.unpack_from(data, 0)[0]:
            if not ready and not poll(max(0, int(timeout * 1000))):
                self._rest = data
                return None
            ready = False
            try:
                more = sock.recv(_CHUNK)
            except BlockingIOError:
                continue
            if not more:
                raise ConnectionError("the judge closed the lane")
            data += more
        size = _LEN.unpack_from(data, 0)[0]
        end = 4 + size
        self._rest = data[end:]
        if self.adaptive and self.spin:  # a judge slower than the spin is not spun for until it answers faster
            self._late = self._late + 1 if time.monotonic() - start > self.spin else 0
        if data[4:6] == b"\x01\x00" and size >= 6 and _LEN.unpack_from(data, 6)[0] == size - 6:
            return [data[10:end]]  # the common case: a one-frame message
        try:
            return unpack(memoryview(data)[4:end])
        except ValueError as err:
            raise ConnectionError(f"broken lane message: {err}") from None

    def close(self) -> None:
        self.sock.close()
