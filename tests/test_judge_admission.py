"""Admission that cannot be starved: idle handshakes expire, pending handshakes are limited, a refused client learns
why and when to retry, and a client whose session expired goes on as in any gymnasium loop. Real judge processes
and sockets on 127.0.0.1."""
from __future__ import annotations

import time

import numpy as np
import pytest
import zmq

from slm_lab_like.remote import RemoteEnv, RemoteError, RemoteVecEnv, judge_for, serve, shutdown, spawn_judge, stop_judge
from slm_lab_like.remote import protocol as P

pytestmark = pytest.mark.timeout(60)

EXPIRY = 1.0


def hellos(address: str, count: int, sockets: int = 10) -> list[dict]:
    """``count`` token-less hellos from ``sockets`` bare clients that never reset; every reply."""
    ctx = zmq.Context.instance()
    socks = [ctx.socket(zmq.DEALER) for _ in range(sockets)]
    try:
        for sock in socks:
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.RCVTIMEO, 10_000)
            sock.connect(address)
        for i in range(count):
            socks[i % sockets].send_multipart(P.encode({"t": "hello", "v": P.PROTOCOL_VERSION, "s": i}))
        return [P.decode(socks[i % sockets].recv_multipart()) for i in range(count)]
    finally:
        for sock in socks:
            sock.close(0)


def test_a_thousand_idle_handshakes_cannot_lock_out_a_good_client():
    """1,000 hellos that never reset: 32 are admitted, the rest are refused as busy with when to retry; a good
    client is admitted within one expiry period of the flood and plays."""
    proc, address = spawn_judge("CartPole-v1", handshake_timeout=EXPIRY)
    try:
        start = time.monotonic()
        replies = hellos(address, 1000)
        flooded = time.monotonic()
        welcomed = [r for r in replies if r["t"] == "welcome"]
        busy = [r for r in replies if r.get("code") == "busy"]
        assert len(welcomed) == 32 and len(busy) == 968
        assert all(0 <= r["retry"] <= EXPIRY for r in busy)
        env = RemoteEnv(address, timeout=5)
        admitted = time.monotonic()
        assert admitted - flooded < EXPIRY + 0.5 and admitted - start < 2 * EXPIRY + 1.0
        obs, _ = env.reset(seed=0)
        for _ in range(20):
            obs, _, terminated, truncated, _ = env.step(0)
            if terminated or truncated:
                break
        assert obs.shape == (4,)
        env.close()
    finally:
        stop_judge(proc)


def test_a_refused_client_learns_why_and_when():
    """Past the pending limit a hello is refused as busy with a retry time; a full judge says when a session would
    expire; a client that may wait is admitted when the judge frees up."""
    address = serve("CartPole-v1", max_pending=2, max_sessions=3, handshake_timeout=EXPIRY)
    try:
        idle = [RemoteEnv(address, timeout=5) for _ in range(2)]
        with pytest.raises(RemoteError) as err:
            RemoteEnv(address, timeout=5, connect_timeout=0.3)
        assert err.value.code == "busy" and 0 < err.value.retry_after <= EXPIRY
        assert "retry in" in str(err.value)
        idle[0].reset()
        third = RemoteEnv(address, timeout=5)  # one pending slot is free again
        third.reset()
        with pytest.raises(RemoteError) as err:
            RemoteEnv(address, timeout=5, connect_timeout=0.3)
        assert err.value.code == "full" and err.value.retry_after is not None
        start = time.monotonic()
        late = RemoteEnv(address, timeout=5, connect_timeout=3.0)  # idle[1] expires, then there is room
        assert time.monotonic() - start < EXPIRY + 0.5
        assert late.reset()[0].shape == (4,)
        for env in (*idle, third, late):
            env.close()
    finally:
        shutdown(address)


@pytest.mark.parametrize("idle", [1.0, None])
def test_capacity_held_by_silence_goes_to_a_new_client_after_the_idle_time(idle: float | None) -> None:
    """A vector client takes all 64 env instances of a default-sized judge, resets once and falls silent: a new
    client is admitted once that session has been silent for the idle time (it expires then; its client starts a
    new session on its next reset); without an idle time the judge stays full until the session timeout."""
    address = serve("CartPole-v1", idle_timeout=idle, session_timeout=600.0)
    try:
        hog = RemoteVecEnv(address, 64, timeout=5)
        hog.reset(seed=0)
        with pytest.raises(RemoteError) as err:
            RemoteEnv(address, timeout=5, connect_timeout=0.2)
        assert err.value.code == "full" and "64 of 64" in str(err.value)
        assert err.value.retry_after is not None and err.value.retry_after <= (idle or 600.0)
        if idle is None:
            time.sleep(1.5)
            with pytest.raises(RemoteError) as err:
                RemoteEnv(address, timeout=5, connect_timeout=0.2)
            assert err.value.code == "full"
            return
        start = time.monotonic()
        late = RemoteEnv(address, timeout=5, connect_timeout=5.0)  # retried when the refusal said
        assert time.monotonic() - start < idle + 1.0
        assert late.reset(seed=1)[0].shape == (4,)
        assert list(judge_for(address).sessions.values())[0].size == 1
        assert "new client waited for room" in judge_for(address)._expired[hog.token]
        late.close()
        _, _, _, truncated, info = hog.step(np.zeros(64, np.int64))  # its session expired: a gymnasium loop goes on
        assert truncated.all() and list(info["final_info"]["reason"]) == ["session_expired"] * 64
        hog.close()
    finally:
        shutdown(address)


def test_an_expired_session_renews_itself_in_a_gymnasium_loop():
    """A client idle past the handshake timeout still resets; a client stopped past the session timeout in the
    middle of an episode sees it end (truncated, info["reason"]) and resets, as any gymnasium loop does."""
    address = serve("CartPole-v1", handshake_timeout=0.3, session_timeout=0.6)
    try:
        env = RemoteEnv(address, timeout=5)
        first = env.token
        time.sleep(0.8)
        assert env.reset(seed=1)[0].shape == (4,) and env.token != first
        env.step(0)
        time.sleep(1.2)
        episodes, reasons, steps = 0, [], 0
        while episodes < 3:
            obs, _, terminated, truncated, info = env.step(steps % 2)
            steps += 1
            if terminated or truncated:
                episodes += 1
                reasons.append(info.get("reason"))
                obs, _ = env.reset()
        assert reasons[0] == "session_expired" and reasons[1:] == [None, None]
        assert np.isfinite(obs).all() and len(judge_for(address).sessions) == 1
        env.close()
    finally:
        shutdown(address)
