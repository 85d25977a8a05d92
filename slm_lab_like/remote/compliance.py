"""A compliance kit for judges: named checks of docs/PROTOCOL.md that any single-agent judge can be run against, the
lab's or one written in another language, each a real exchange over the judge's own socket.

    python -m slm_lab_like.remote.compliance tcp://127.0.0.1:5555 [--secret S] [--timeout 5]

prints one line per check (`pass` or `FAIL` and why) and exits 1 when any failed; `check_judge(address)` returns the
results. Every check opens its own session (a fresh connection and hello), so one failure does not hide another, and
closes it. The checks speak msgpack only (binary requests are an offer a judge may not make) and need nothing of the
env but its spaces: actions are sampled from the welcome's action space.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import zmq
from gymnasium import spaces

from slm_lab_like.remote import protocol as P

LOST = ("unknown_token", "session_expired")  # what a closed session's token may be told


class CheckFailed(Exception):
    """A check's expectation that the judge did not meet; its message says which."""


@dataclass
class Result:
    """One check: its name, whether the judge passed it, and why not."""

    name: str
    passed: bool
    detail: str = ""


class Probe:
    """One client connection that speaks the protocol by hand: a DEALER socket, a hello, one request at a time."""

    def __init__(self, address: str, secret: str | None, timeout: float) -> None:
        self.sock: zmq.Socket = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.RCVTIMEO, int(timeout * 1000))
        self.sock.connect(address)
        self.secret = secret
        self.seq = 0
        self.token = ""
        self.welcome: dict[str, Any] = {}
        self.obs_space: spaces.Space = spaces.Discrete(1)
        self.act_space: spaces.Space = spaces.Discrete(1)

    def send(self, frames: list[Any]) -> dict[str, Any]:
        """Send raw frames; the decoded reply (CheckFailed when none comes in time or it cannot be read)."""
        self.sock.send_multipart(frames)
        try:
            reply = P.decode(self.sock.recv_multipart())
        except zmq.Again:
            raise CheckFailed("no reply within the timeout") from None
        except P.ProtocolError as exc:
            raise CheckFailed(f"unreadable reply: {exc}") from None
        return reply

    def call(self, header: dict[str, Any], seq: int | None = None) -> dict[str, Any]:
        """Send a msgpack request with the session's token and the next sequence number (or `seq`)."""
        if seq is None:
            self.seq += 1
            seq = self.seq
        return self.send(P.encode({"k": self.token, **header, "s": seq}))

    def hello(self, **fields: Any) -> dict[str, Any]:
        """Say hello; keep the token and spaces of the welcome (CheckFailed when there is none)."""
        reply = self.send(P.encode({"t": "hello", "v": P.PROTOCOL_VERSION, "auth": self.secret, "s": 0, **fields}))
        expect(reply.get("t") == "welcome", f"hello got {brief(reply)}, not a welcome")
        self.welcome, self.token = reply, reply.get("k", "")
        try:
            self.obs_space = P.build_space(reply.get("obs_space"))
            self.act_space = P.build_space(reply.get("act_space"))
        except (P.ProtocolError, ValueError, TypeError, KeyError) as exc:
            raise CheckFailed(f"the welcome's spaces cannot be read: {exc}") from None
        self.act_space.seed(0)
        return reply

    def action(self) -> Any:
        return P.to_wire(self.act_space, self.act_space.sample())

    def close(self) -> None:
        self.sock.close(0)


def expect(condition: bool, detail: str) -> None:
    if not condition:
        raise CheckFailed(detail)


def brief(reply: dict[str, Any]) -> str:
    """A reply in a few words: its type, and an error's code and message."""
    if reply.get("t") == "error":
        return f"error {reply.get('code')!r} ({str(reply.get('msg'))[:60]})"
    return f"a {reply.get('t')!r} reply"


def expect_error(reply: dict[str, Any], codes: tuple[str, ...] | str, seq: int | None) -> None:
    """The reply is an error with one of `codes` that echoes `seq`."""
    codes = (codes,) if isinstance(codes, str) else codes
    expect(reply.get("t") == "error" and reply.get("code") in codes, f"expected error {' or '.join(codes)}, got "
                                                                       f"{brief(reply)}")
    expect(reply.get("s") == seq, f"the error does not echo the request's s ({seq!r}): {reply.get('s')!r}")


def observation(probe: Probe, reply: dict[str, Any], kind: str) -> Any:
    """The observation of a reset or step reply, read and checked against the welcome's space."""
    expect(reply.get("t") == kind, f"a {kind} got {brief(reply)}")
    expect(reply.get("s") == probe.seq, f"the {kind} reply does not echo s {probe.seq}: {reply.get('s')!r}")
    try:
        obs = P.from_wire(probe.obs_space, reply.get("o"))
    except (P.ProtocolError, ValueError, TypeError) as exc:
        raise CheckFailed(f"the {kind} observation cannot be read as {probe.obs_space}: {exc}") from None
    expect(probe.obs_space.contains(obs), f"the {kind} observation is not in {probe.obs_space}")
    expect(isinstance(reply.get("i"), dict), f"the {kind} info is not a map: {reply.get('i')!r}")
    return obs


def check_hello(probe: Probe) -> None:
    """A welcome: version 1, a token, the hello's s echoed, spaces that can be read, last_seq -1."""
    welcome = probe.hello()
    expect(welcome.get("v") == P.PROTOCOL_VERSION, f"the welcome's version is {welcome.get('v')!r}")
    expect(isinstance(probe.token, str) and len(probe.token) > 0, f"the welcome's token is {probe.token!r}")
    expect(welcome.get("s") == 0, f"the welcome does not echo the hello's s 0: {welcome.get('s')!r}")
    expect(welcome.get("server") in ("single", "multi"), f"the welcome's server is {welcome.get('server')!r}")
    expect(welcome.get("last_seq") == -1, f"a new session's last_seq is {welcome.get('last_seq')!r}, not -1")


def check_bad_version(probe: Probe) -> None:
    """A hello of another protocol version, or of the version's number in another type (1.0, true), is refused with
    bad_version."""
    for s, version in ((7, P.PROTOCOL_VERSION + 98), (8, float(P.PROTOCOL_VERSION)), (9, True)):
        reply = probe.send(P.encode({"t": "hello", "v": version, "auth": probe.secret, "s": s}))
        expect_error(reply, "bad_version", s)


def check_unknown_token(probe: Probe) -> None:
    """A request with a token the judge never gave is refused with unknown_token."""
    probe.token = "0" * 32
    expect_error(probe.call({"t": "reset"}), "unknown_token", probe.seq)


def check_unknown_type(probe: Probe) -> None:
    """A request of a type the protocol does not have is refused with unknown_type."""
    probe.hello()
    expect_error(probe.call({"t": "dance"}), "unknown_type", probe.seq)


def check_malformed(probe: Probe) -> None:
    """Bytes that are no message get malformed, and the judge goes on (a ping after it is answered)."""
    probe.hello()
    expect_error(probe.send([b"\xa5hello"]), "malformed", None)
    expect_error(probe.call({"t": "step"}), "malformed", probe.seq)  # a step without its action
    reply = probe.call({"t": "ping"})
    expect(reply.get("t") == "pong" and reply.get("s") == probe.seq, f"a ping after them got {brief(reply)}")


def check_step_before_reset(probe: Probe) -> None:
    """A step before the session's first reset is refused with step_before_reset."""
    probe.hello()
    expect_error(probe.call({"t": "step", "a": probe.action()}), "step_before_reset", probe.seq)


def check_reset_and_step(probe: Probe) -> None:
    """A reset gives an observation of the space; steps give observation, reward and the two end flags."""
    probe.hello()
    observation(probe, probe.call({"t": "reset", "seed": 0}), "reset")
    for _ in range(3):
        reply = probe.call({"t": "step", "a": probe.action()})
        observation(probe, reply, "step")
        expect(isinstance(reply.get("r"), (int, float)) and not isinstance(reply.get("r"), bool),
               f"the reward is {reply.get('r')!r}")
        expect(isinstance(reply.get("te"), bool) and isinstance(reply.get("tr"), bool),
               f"terminated / truncated are {reply.get('te')!r} / {reply.get('tr')!r}")
        if reply["te"] or reply["tr"]:
            observation(probe, probe.call({"t": "reset"}), "reset")


def check_seeded_reset(probe: Probe) -> None:
    """Two resets with one seed give one first observation: the judge passes the client's seed to its env."""
    probe.hello()
    first = observation(probe, probe.call({"t": "reset", "seed": 7}), "reset")
    probe.call({"t": "step", "a": probe.action()})
    again = observation(probe, probe.call({"t": "reset", "seed": 7}), "reset")
    same = np.array_equal(np.asarray(first), np.asarray(again)) if not isinstance(first, dict) else first == again
    expect(bool(same), "two resets with seed 7 gave different observations")


def check_invalid_action(probe: Probe) -> None:
    """An action outside the action space is refused with invalid_action and changes nothing: the next step with a
    fresh s is served."""
    probe.hello()
    observation(probe, probe.call({"t": "reset", "seed": 0}), "reset")
    space = probe.act_space
    if isinstance(space, spaces.Discrete):
        bad: Any = int(space.start + space.n + 5)
    else:
        bad = [[1.0e9]] * 3  # the wrong shape for any action space the protocol carries
    expect_error(probe.call({"t": "step", "a": bad}), "invalid_action", probe.seq)
    observation(probe, probe.call({"t": "step", "a": probe.action()}), "step")


def check_retransmit(probe: Probe) -> None:
    """A step sent again with retry gets the same reply, not a second step; the same s without retry is
    duplicate_step."""
    probe.hello()
    observation(probe, probe.call({"t": "reset", "seed": 0}), "reset")
    action = probe.action()
    first = probe.call({"t": "step", "a": action})
    observation(probe, first, "step")
    again = probe.call({"t": "step", "a": action, "retry": True}, seq=probe.seq)
    same = all(np.array_equal(np.asarray(first.get(key)), np.asarray(again.get(key))) for key in ("o", "r", "te", "tr"))
    expect(again.get("t") == "step" and same, f"the retransmitted step got {brief(again)}, not the first reply")
    expect_error(probe.call({"t": "step", "a": action}, seq=probe.seq), "duplicate_step", probe.seq)


def check_ping(probe: Probe) -> None:
    """A ping is answered with a pong that echoes its s."""
    probe.hello()
    reply = probe.call({"t": "ping"})
    expect(reply.get("t") == "pong" and reply.get("s") == probe.seq, f"a ping got {brief(reply)}")


def check_close(probe: Probe) -> None:
    """A close is answered with closed, and the token is gone after it."""
    probe.hello()
    observation(probe, probe.call({"t": "reset", "seed": 0}), "reset")
    reply = probe.call({"t": "close"})
    expect(reply.get("t") == "closed" and reply.get("s") == probe.seq, f"a close got {brief(reply)}")
    expect_error(probe.call({"t": "reset"}), LOST, probe.seq)


CHECKS: dict[str, Callable[[Probe], None]] = {
    "hello": check_hello,
    "bad_version": check_bad_version,
    "unknown_token": check_unknown_token,
    "unknown_type": check_unknown_type,
    "malformed": check_malformed,
    "step_before_reset": check_step_before_reset,
    "reset_and_step": check_reset_and_step,
    "seeded_reset": check_seeded_reset,
    "invalid_action": check_invalid_action,
    "retransmit": check_retransmit,
    "ping": check_ping,
    "close": check_close,
}


def check_judge(address: str, secret: str | None = None, timeout: float = 5.0) -> list[Result]:
    """Every check against the single-agent judge at `address`, each on its own connection."""
    results = []
    for name, check in CHECKS.items():
        probe = Probe(address, secret, timeout)
        try:
            check(probe)
            results.append(Result(name, True))
        except CheckFailed as exc:
            results.append(Result(name, False, str(exc)))
        finally:
            probe.close()
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m slm_lab_like.remote.compliance", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("address", help="the judge's address, tcp://HOST:PORT")
    p.add_argument("--secret", default=None, help="the judge's shared secret, when it has one")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for each reply (default 5)")
    args = p.parse_args(argv)
    return report(check_judge(args.address, args.secret, args.timeout))


def report(results: list[Result]) -> int:
    """Print a line per check and the count passed; the exit code (1 when any failed)."""
    for r in results:
        print(f"{'pass' if r.passed else 'FAIL'}  {r.name}" + (f": {r.detail}" if r.detail else ""))
    failed = sum(not r.passed for r in results)
    print(f"{len(results) - failed} of {len(results)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
