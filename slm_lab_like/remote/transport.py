"""The ZeroMQ side of the wire, with its hot-path tricks in this one place: a judge's ROUTER port, and the raw socket
calls the judge and the client share. The same-host lane is the other transport (:mod:`.lane`).

The tricks, each measured where it was made (docs/DESIGN.md §6):
- pyzmq's Cython socket methods are called under its Python wrappers, which only add routing-id and group handling
  that ROUTER and DEALER sockets never use: about a microsecond saved a call;
- a message's further frames are read from each frame's own ``more`` flag, not by asking the socket (RCVMORE costs
  several microseconds, as pyzmq resolves the option's enum in Python);
- a port waiting on ZeroMQ alone waits in a blocking receive (asking its events and polling its descriptor costs
  several system calls more a request); one polled beside other sockets asks ZeroMQ's events only when its
  descriptor woke the loop or a ZeroMQ call since the last look may have taken that wake-up (``stale``).
"""
from __future__ import annotations

from typing import Any, Callable

import zmq

RawSocket = zmq.backend.Socket if issubclass(zmq.Socket, zmq.backend.Socket) else zmq.Socket
raw_send, raw_recv = RawSocket.send, RawSocket.recv
# Only integer options are read with it (EVENTS, RCVMORE); pyzmq's stub types every option's value int | bytes.
raw_get: Callable[[Any, int], int] = RawSocket.get  # type: ignore[assignment]  # stub: int | bytes for every option
raw_recv_into = getattr(RawSocket, "recv_into", None)
SNDMORE, RCVMORE, EVENTS, POLLIN = int(zmq.SNDMORE), int(zmq.RCVMORE), int(zmq.EVENTS), int(zmq.POLLIN)


def receive_first(sock: zmq.Socket, wait_ms: int, set_ms: int) -> bytes | None:
    """The first frame of the next message, waiting at most ``wait_ms`` ms (None when none came). ``set_ms`` is the
    socket's receive timeout as its owner last set it: the option is set only when it changes (a system call)."""
    if wait_ms != set_ms:
        sock.setsockopt(zmq.RCVTIMEO, wait_ms)
    try:
        return raw_recv(sock)
    except zmq.Again:
        return None


def recv_rest(sock: zmq.Socket, ident: bytes) -> list[bytes]:
    """The message whose routing id ``ident`` was just received: the id and every frame after it (a ROUTER always
    delivers the peer's id plus at least one frame)."""
    frame = raw_recv(sock, 0, False)
    msg = [ident, frame.bytes]
    while frame.more:
        frame = raw_recv(sock, 0, False)
        msg.append(frame.bytes)
    return msg


class RouterPort:
    """A judge's ROUTER socket: bound at ``address`` with the judge's message limit (and its CURVE secret key when it
    encrypts), read one whole message at a time, answered along a request's routing frames."""

    def __init__(self, address: str, max_message_bytes: int, curve_secret_key: bytes | None) -> None:
        sock: zmq.Socket = zmq.Context.instance().socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, 4 * max_message_bytes + 4096)
        sock.setsockopt(zmq.SNDHWM, 10_000)
        sock.setsockopt(zmq.RCVHWM, 10_000)
        if curve_secret_key is not None:
            sock.curve_server = True
            sock.curve_secretkey = curve_secret_key
        try:
            sock.bind(address)
        except zmq.ZMQError:
            sock.close(0)
            raise
        self.sock = sock
        self.address: str = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.stale = True  # whether ZeroMQ's events must be asked before a poll sleeps again
        self._rcvtimeo = -2  # the receive timeout (ms) as last set

    def fileno(self) -> int:
        """The descriptor a poll watches: readable when ZeroMQ's state may have changed, not when a message waits."""
        return int(self.sock.getsockopt(zmq.FD))

    def receive(self, wait_ms: int) -> list[bytes] | None:
        """The next message (routing id first), waiting at most ``wait_ms`` ms for it; None when none came."""
        sock, self.stale = self.sock, True  # the receive may take the descriptor's wake-up for itself
        ident = receive_first(sock, wait_ms, self._rcvtimeo)
        self._rcvtimeo = wait_ms
        return None if ident is None else recv_rest(sock, ident)

    def waiting(self) -> bool:
        """Whether a message waits (asked first, as a zmq.Again costs more than the question)."""
        return bool(raw_get(self.sock, EVENTS) & POLLIN)

    def take(self) -> list[bytes]:
        """A message known to wait (see :meth:`waiting`)."""
        sock = self.sock
        return recv_rest(sock, raw_recv(sock))

    def send(self, envelope: list[Any], frames: list[Any]) -> None:
        """A reply along a request's routing frames, copied as every send is: pyzmq's zero-copy path hands buffers to
        a collector thread of its own, a stall of which stalls every socket of the process."""
        sock, self.stale = self.sock, True
        for part in envelope:
            raw_send(sock, part, SNDMORE)
        last = len(frames) - 1
        for i, part in enumerate(frames):
            raw_send(sock, part, SNDMORE if i < last else 0)

    def close(self) -> None:
        self.sock.close(0)
