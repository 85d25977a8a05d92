"""The client side of the compliance kit: the lab's RemoteEnv passes every check of the examining judge, and clients
broken in one way each fail the check named for their fault."""
from __future__ import annotations

import threading
from typing import Any, Callable

import pytest
import zmq

from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.client import RemoteEnv
from slm_lab_like.remote.client_compliance import CHECKS, Examiner
from slm_lab_like.remote.protocol import JudgeTimeout


def examine(client: Callable[[str], Any], timeout: float = 10.0) -> dict[str, str]:
    """Run `client(address)` against an examiner; {check: "" when it passed, else its failure}."""
    examiner = Examiner(steps=5, withhold=3, timeout=timeout)
    thread = threading.Thread(target=client, args=(examiner.address,), daemon=True)
    thread.start()
    results = examiner.run()
    thread.join(timeout=30)
    return {r.name: ("" if r.passed else r.detail or "failed") for r in results}


def play(address: str, timeout: float = 1.0, **options: Any) -> None:
    env = RemoteEnv(address, timeout=timeout, **options)
    env.reset(seed=0)
    for _ in range(6):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    env.close()


def test_the_labs_client_passes_every_check() -> None:
    got = examine(lambda address: play(address, retries=1))  # binary frames; the examiner offers no same-host lane
    assert got == {name: "" for name in CHECKS}


def test_a_client_that_never_resends_fails_retransmit() -> None:
    def give_up(address: str) -> None:
        try:
            play(address, retries=0)
        except JudgeTimeout:
            pass

    got = examine(give_up, timeout=2.0)
    assert got["retransmit"] and got["hello"] == got["token"] == got["sequence"] == ""


class Scripted:
    """A client speaking the protocol by hand over a DEALER socket, broken as its arguments say."""

    def __init__(self, version: Any = 1, same_seq: bool = False, bad_action: bool = False, token: str | None = None,
                 seed: Any = 0):
        self.version, self.same_seq, self.bad_action, self.token = version, same_seq, bad_action, token
        self.seed = seed

    def __call__(self, address: str) -> None:
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVTIMEO, 1000)
        sock.connect(address)
        try:
            welcome = self.ask(sock, {"t": "hello", "v": self.version, "s": 0})
            token = self.token or welcome.get("k")
            s = 1
            self.ask(sock, {"t": "reset", "k": token, "s": s, "seed": self.seed})
            for i in range(5):
                s = s if self.same_seq else s + 1
                action = 7 if self.bad_action else 0
                reply = self.ask(sock, {"t": "step", "k": token, "s": s, "a": action}, retry_on_silence=True)
                if reply.get("te") or reply.get("tr"):
                    s += 1
                    self.ask(sock, {"t": "reset", "k": token, "s": s})
            self.ask(sock, {"t": "close", "k": token, "s": s + 1})
        except zmq.Again:
            pass
        finally:
            sock.close(0)

    @staticmethod
    def ask(sock: zmq.Socket, header: dict, retry_on_silence: bool = False) -> dict:
        sock.send_multipart(P.encode(header))
        try:
            return P.decode(sock.recv_multipart())
        except zmq.Again:
            if not retry_on_silence:
                raise
            sock.send_multipart(P.encode({**header, "retry": True}))
            return P.decode(sock.recv_multipart())


@pytest.mark.parametrize("client, check", [
    (Scripted(version=1.0), "hello"),
    (Scripted(version=True), "hello"),
    (Scripted(seed="0"), "fields"),
    (Scripted(same_seq=True), "sequence"),
    (Scripted(bad_action=True), "actions"),
    (Scripted(token="00" * 16), "token"),
])
def test_a_client_broken_one_way_fails_that_check(client: Scripted, check: str) -> None:
    got = examine(client, timeout=3.0)
    assert got[check], got
