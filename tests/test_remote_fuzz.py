"""Hostile-input test: 1,000 hypothesis-generated malformed messages, then the judge still serves a client."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slm_lab_like.remote import RemoteEnv, spawn_judge, stop_judge
from slm_lab_like.remote import protocol as P

LIMIT = 64 * 1024
ERROR_CODES = {"malformed", "too_large", "unknown_token", "unknown_type", "bad_version", "invalid_action",
               "step_before_reset", "duplicate_step", "duplicate_reset", "needs_reset", "full", "auth_failed",
               "env_error", "render_unavailable", "episode_limit", "session_expired", "busy", "unsupported"}


@pytest.fixture(scope="module")
def judge():
    """A CartPole judge subprocess with a 64 KiB message limit, plus a raw DEALER socket and a valid token."""
    proc, address = spawn_judge("CartPole-v1", extra_args=["--max-message-bytes", str(LIMIT), "--max-sessions", "8"])
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 5000)
    sock.connect(address)
    sock.send_multipart(P.encode({"t": "hello", "v": P.PROTOCOL_VERSION, "s": 0}))
    token = P.decode(sock.recv_multipart())["k"]
    sock.send_multipart(P.encode({"t": "reset", "k": token, "s": 1}))  # a session that reset does not expire soon
    assert P.decode(sock.recv_multipart())["t"] == "reset"
    try:
        yield proc, address, sock, token
    finally:
        sock.close(0)
        stop_judge(proc)


json_like = st.recursive(
    st.none() | st.booleans() | st.integers(-2**64, 2**64 - 1) | st.floats() | st.text(max_size=20)
    | st.binary(max_size=40),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=20,
)


def _pack(obj) -> bytes:
    try:
        return msgpack.packb(obj, use_bin_type=True)
    except (OverflowError, ValueError, TypeError):
        return b"\xc1"


@st.composite
def bad_messages(draw, token: str):
    """Frames that are malformed, mistyped, oversized or semantically invalid."""
    kind = draw(st.sampled_from(["random", "msgpack", "header", "array", "oversized", "frames"]))
    if kind == "random":
        return draw(st.lists(st.binary(max_size=300), min_size=1, max_size=4))
    if kind == "msgpack":
        return [_pack(draw(json_like))]
    if kind == "header":
        header = {"t": draw(st.sampled_from(sorted(P.REQUEST_TYPES)) | st.text(max_size=10) | st.integers()),
                  "k": draw(st.just(token) | st.text(max_size=40) | st.none() | st.integers()),
                  "s": draw(st.integers(-5, 2**70) | st.none() | st.text(max_size=3)),
                  "v": draw(st.just(P.PROTOCOL_VERSION) | json_like),
                  "a": draw(json_like | st.integers(-3, 5)),
                  "seed": draw(st.integers(-2**70, 2**70) | json_like),
                  "opt": draw(json_like)}
        keep = draw(st.lists(st.sampled_from(sorted(header)), unique=True))
        message = {k: header[k] for k in ["t", *keep]}
        if message["t"] == "hello" and message.get("k") is None:
            message["t"] = "ping"
        if message["t"] == "close" and message.get("k") == token:
            message["k"] = "x"
        return [_pack(message)]
    if kind == "array":
        meta = draw(st.tuples(st.integers(-2, 3), st.sampled_from(["<f4", "|O", "V8", "<f8", "xx", "<i8", 5]),
                              st.lists(st.integers(-3, 2**40), max_size=3)))
        ext = msgpack.ExtType(draw(st.sampled_from([1, 2, 99])), _pack(list(meta)))
        header = {"t": "step", "k": token, "s": draw(st.integers(0, 10)), "a": ext}
        return [msgpack.packb(header, use_bin_type=True)] + draw(st.lists(st.binary(max_size=64), max_size=3))
    if kind == "oversized":
        size = draw(st.integers(LIMIT + 1, 2 * LIMIT))
        return [_pack({"t": "step", "k": token, "s": 1, "a": 0}), b"\0" * size]
    return [_pack({"t": "ping", "k": token, "s": 1})] * draw(st.integers(P.MAX_FRAMES + 1, P.MAX_FRAMES + 5))


@pytest.mark.timeout(300)
@settings(max_examples=1000, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                  HealthCheck.data_too_large])
@given(data=st.data())
def test_judge_survives_malformed_messages(judge, data):
    """Every hostile message gets exactly one well-formed reply, and the judge stays up."""
    proc, _, sock, token = judge
    frames = data.draw(bad_messages(token))
    sock.send_multipart(frames)
    reply_frames = sock.recv_multipart()
    if len(reply_frames) > 1 and not reply_frames[0]:
        reply_frames = reply_frames[1:]
    reply = P.decode(reply_frames)
    assert reply["t"] in {"error", "pong", "welcome", "reset", "step", "closed", "render"}
    if reply["t"] == "error":
        assert reply["code"] in ERROR_CODES
    if len(frames) > 1 and len(frames[1]) > LIMIT:
        assert reply["code"] == "too_large"
    assert proc.poll() is None


@pytest.mark.timeout(60)
def test_judge_serves_well_formed_client_after_fuzzing(judge):
    """After the fuzzing the same judge still runs episodes for a well-formed client."""
    proc, address, _, _ = judge
    env = RemoteEnv(address, timeout=10)
    obs, _ = env.reset(seed=0)
    steps = 0
    for _ in range(50):
        obs, r, te, tr, _ = env.step(steps % 2)
        steps += 1
        if te or tr:
            obs, _ = env.reset()
    assert obs.shape == (4,) and np.isfinite(obs).all() and steps == 50
    env.close()
    assert proc.poll() is None
