"""The client side of the compliance kit: an examining judge that a client under test plays one session through.

    python -m slm_lab_like.remote.client_compliance [--env CartPole-v1] [--bind tcp://127.0.0.1:0] [--steps 5]

It prints its address and waits for one client to say hello, reset, take at least `--steps` steps and close. Every
request goes on to a real judge of the env (the lab's own, in this process) and every reply back, and on the way the
examiner checks what docs/PROTOCOL.md asks of a client:

    hello       the session opens with a msgpack hello of protocol version 1 (the integer) and an integer s
    fields      every msgpack request has the fields its type declares, of their types (protocol.REQUESTS, §5)
    token       every later request carries the welcome's token
    sequence    each new reset or step has a larger s than the request before it (sections 4.2)
    actions     every step's action lies in the welcome's action space
    retransmit  the reply to step `--withhold` (default 3) is held back: the client must send that step again, with
                the same s, marked retry (msgpack "retry": true or the binary FLAG_RETRY), and go on (section 4.3)
    close       the client ends with a close carrying its token

Single sessions only, on the msgpack path or the binary one (a vector session's hello is refused by the examiner:
it checks one env a client). The lab's RemoteEnv passes every check; the kit's tests also run clients broken in one
way each, which fail the check named for their fault.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import zmq

from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.compliance import Result, report
from slm_lab_like.remote.hosting import serve, shutdown

CHECKS = ("hello", "fields", "token", "sequence", "actions", "retransmit", "close")
_KINDS = {P.BIN_STEP: "step", P.BIN_RESET: "reset", P.BIN_VSTEP: "vstep", P.BIN_VRESET: "vreset"}


@dataclass
class Request:
    """What the examiner reads of one request: its type, s, token, retry mark and the step's action problem."""

    kind: str
    seq: Any
    token: str | None
    retry: bool
    header: dict[str, Any] = field(default_factory=dict)
    action_problem: str | None = None


class Examiner:
    """A judge in front of a real one: relays one client's session and checks the client's side of the protocol."""

    def __init__(self, env: str = "CartPole-v1", bind: str = "tcp://127.0.0.1:0", steps: int = 5,
                 withhold: int = 3, timeout: float = 60.0) -> None:
        self.inner = serve(env, lane=False)  # no same-host lane: it would take the client past the examiner
        ctx: zmq.Context = zmq.Context.instance()
        self.front = ctx.socket(zmq.ROUTER)
        self.front.setsockopt(zmq.LINGER, 0)
        self.front.bind(bind)
        self.address = self.front.getsockopt_string(zmq.LAST_ENDPOINT)
        self.back = ctx.socket(zmq.DEALER)
        self.back.setsockopt(zmq.LINGER, 0)
        self.back.connect(self.inner)
        self.steps, self.withhold, self.timeout = steps, withhold, timeout
        self.failures: dict[str, str] = {}
        self.seen: set[str] = set()
        self.token: str | None = None
        self.check_action: Callable[[Any], Any] | None = None  # the welcome's action space's check, msgpack values
        self.codec: Any = None  # its raw layout's codec (None where it has none), for binary steps
        self.last_seq: int | None = None
        self.step_count = 0
        self.held_seq: int | None = None  # the withheld step's s, until the client sends it again
        self.dropping: int | None = None  # drop the judge's reply with this s (the withheld one)
        self.closing = False  # the client sent its close: the session ends with the reply to it
        self.closed = False

    def fail(self, check: str, detail: str) -> None:
        """Record a check's first failure."""
        self.failures.setdefault(check, detail)

    def run(self) -> list[Result]:
        """Relay one session (until its close is answered, or `timeout` seconds of silence); the checks' results."""
        poller = zmq.Poller()
        poller.register(self.front, zmq.POLLIN)
        poller.register(self.back, zmq.POLLIN)
        envelope: list[bytes] = []
        quiet_since = time.monotonic()
        try:
            while not self.closed:
                events = dict(poller.poll(500))
                if not events:
                    if time.monotonic() - quiet_since > self.timeout:
                        self.fail("close", f"the client went silent for {self.timeout:g} s before a close")
                        break
                    continue
                quiet_since = time.monotonic()
                if self.front in events:
                    frames = self.front.recv_multipart()
                    cut = 2 if len(frames) > 2 and frames[1] == b"" else 1  # a REQ client's empty delimiter
                    envelope, body = frames[:cut], frames[cut:]
                    self.examine(body)
                    self.back.send_multipart(body)
                if self.back in events:
                    reply = self.back.recv_multipart()
                    self.relay(envelope, reply)
        finally:
            self.close()
        return self.results()

    def examine(self, frames: list[bytes]) -> None:
        """Check one request of the client against the protocol."""
        req = self.read(frames)
        if req is None:
            return
        if not self.seen:
            self.check_hello(req)
        elif req.kind != "hello" and req.token != self.token:
            self.fail("token", f"a {req.kind} carries token {req.token!r}, not the welcome's")
        self.seen.add(req.kind)
        if self.held_seq is not None:
            self.check_retransmit(req)
        elif req.kind in ("reset", "step") and not (req.retry and req.seq == self.last_seq):  # a resend is no new s
            self.check_sequence(req)
        self.closing = self.closing or req.kind == "close"
        if req.kind == "step":
            if req.action_problem is not None:
                self.fail("actions", req.action_problem)
            if not req.retry:
                self.step_count += 1
                if self.step_count == self.withhold:
                    self.held_seq = self.dropping = req.seq

    def read(self, frames: list[bytes]) -> Request | None:
        """The request in `frames` (msgpack or binary), or None with a failure when it cannot be read."""
        first = frames[0] if frames else b""
        if first[:1] == b"\xc1" and len(first) >= P.BIN_REQ.size:
            tag, flags, seq, raw = P.BIN_REQ.unpack_from(first)
            kind = _KINDS.get(tag, "binary?")
            problem = None
            if kind == "step" and self.check_action is not None:
                try:
                    if self.codec is None:
                        raise P.ProtocolError("malformed", "a binary step in a space with no raw layout")
                    self.codec.check(first, P.BIN_REQ.size)
                except (P.ProtocolError, ValueError) as err:
                    problem = f"step {seq}: {err}"
            return Request(kind, seq, raw.hex(), bool(flags & P.FLAG_RETRY), action_problem=problem)
        try:
            header = P.decode(frames)
        except P.ProtocolError as err:
            self.fail("hello" if not self.seen else "sequence", f"an unreadable request: {err}")
            return None
        kind = str(header.get("t"))
        try:
            P.check_request(header)
        except P.ProtocolError as err:
            self.fail("fields", f"a {kind[:40]!r} request: {err.message}")
        problem = None
        if kind == "step" and self.check_action is not None:
            try:
                self.check_action(header.get("a"))
            except (P.ProtocolError, ValueError, TypeError) as err:
                problem = f"step {header.get('s')}: {err}"
        return Request(kind, header.get("s"), header.get("k"), header.get("retry") is True, header, problem)

    def check_hello(self, req: Request) -> None:
        version = req.header.get("v")
        if req.kind != "hello":
            self.fail("hello", f"the session opens with {req.kind!r}, not a msgpack hello")
        elif type(version) is not int or version != P.PROTOCOL_VERSION:
            self.fail("hello", f"the hello's version is {version!r}, not the integer {P.PROTOCOL_VERSION}")
        elif type(req.seq) is not int:
            self.fail("hello", f"the hello's s is {req.seq!r}, not an integer")
        elif req.header.get("n") is not None:
            self.fail("hello", "a vector hello: the examiner checks single sessions")

    def check_sequence(self, req: Request) -> None:
        if type(req.seq) is not int:
            self.fail("sequence", f"a {req.kind}'s s is {req.seq!r}, not an integer")
        elif self.last_seq is not None and req.seq <= self.last_seq:
            self.fail("sequence", f"a new {req.kind} has s {req.seq} after s {self.last_seq}")
        else:
            self.last_seq = req.seq

    def check_retransmit(self, req: Request) -> None:
        """The request after a withheld reply must be that step again, same s, marked retry."""
        if req.kind != "step" or req.seq != self.held_seq:
            self.fail("retransmit", f"after the reply to step {self.held_seq} was held back the client sent a "
                                    f"{req.kind} with s {req.seq!r}, not that step again")
        elif not req.retry:
            self.fail("retransmit", f"step {self.held_seq} was sent again without the retry mark")
        self.held_seq = None

    def relay(self, envelope: list[bytes], reply: list[bytes]) -> None:
        """Pass a reply of the judge on to the client (the withheld one is dropped); learn the welcome's token and
        spaces."""
        first = reply[0] if reply else b""
        if first[:1] == b"\xc1":
            seq: Any = P.BIN_REP.unpack_from(first)[2] if len(first) >= P.BIN_REP.size else None
        else:
            try:
                header = P.decode(reply)
            except P.ProtocolError:
                header = {}
            seq = header.get("s")
            if header.get("t") == "welcome" and self.token is None:
                self.token = header.get("k")
                act_space = P.build_space(header["act_space"])  # its checks made once, not on every step
                self.check_action, self.codec = P.make_action_checker(act_space), P.make_fixed_codec(act_space)
                self.last_seq = header.get("last_seq")
        if self.dropping is not None and seq == self.dropping:
            self.dropping = None
            return
        if envelope:
            self.front.send_multipart(envelope + reply)
        self.closed = self.closing

    def results(self) -> list[Result]:
        """Each check, passed unless it failed or the session never reached what it checks."""
        if self.step_count < self.steps:
            self.fail("actions", f"the client took {self.step_count} step(s), fewer than the {self.steps} asked")
        if self.step_count < self.withhold:
            self.fail("retransmit", f"the session ended before step {self.withhold}, whose reply is held back")
        if self.held_seq is not None:
            self.fail("retransmit", f"the client never sent step {self.held_seq} again after its reply was held back")
        if "close" not in self.seen:
            self.fail("close", "the client never sent a close")
        return [Result(name, name not in self.failures, self.failures.get(name, "")) for name in CHECKS]

    def close(self) -> None:
        self.front.close(0)
        self.back.close(0)
        shutdown(self.inner)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m slm_lab_like.remote.client_compliance", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="CartPole-v1", help="the env the client plays (default CartPole-v1)")
    p.add_argument("--bind", default="tcp://127.0.0.1:0", help="where the examiner listens (default: a free port)")
    p.add_argument("--steps", type=int, default=5, help="steps the client must take (default 5)")
    p.add_argument("--withhold", type=int, default=3, help="the step whose reply is held back (default 3)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds of silence before giving up (default 60)")
    args = p.parse_args(argv)
    examiner = Examiner(args.env, args.bind, args.steps, args.withhold, args.timeout)
    print(f"examiner at {examiner.address}: connect your client, reset, take {args.steps} steps, close", flush=True)
    return report(examiner.run())


if __name__ == "__main__":
    sys.exit(main())
