"""The binary hot path of step/reset: codec round trips, typed errors for bad binary frames, fallbacks."""

from __future__ import annotations

import struct

import gymnasium as gym
import numpy as np
import pytest
import zmq
from gymnasium import spaces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from slm_lab_like.remote import (JudgeServer, RemoteEnv, RemoteError, judge_for, serve, shutdown, spawn_judge,
                                 stop_judge)
from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.vector_client import RemoteVecEnv

pytestmark = pytest.mark.timeout(120)

DTYPES = ["<f4", "<f8", "<f2", "|u1", "|i1", "<i2", "<u2", "<i4", "<i8", "<u8"]


@st.composite
def box_and_value(draw):
    """A Box space of a random dtype/shape and a value of exactly its wire form (dtype and shape)."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=3)))
    value = draw(hnp.arrays(dtype, shape))
    if dtype.kind == "f":
        low, high = np.full(shape, -np.inf, dtype), np.full(shape, np.inf, dtype)
    else:
        info = np.iinfo(dtype)
        low, high = np.full(shape, info.min, dtype), np.full(shape, info.max, dtype)
    with np.errstate(all="ignore"):
        space = spaces.Box(low, high, shape, dtype)
    return space, value


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(box_and_value())
def test_fixed_codec_box_roundtrip(case):
    """Box values survive pack/unpack bit for bit, as fresh writable arrays of the space's dtype and shape."""
    space, value = case
    codec = P.make_fixed_codec(space)
    assert codec is not None
    data = codec.pack(value)
    assert isinstance(data, bytes) and len(data) == codec.nbytes == value.nbytes
    buf = b"\0" * 5 + data
    back = codec.unpack(buf, 5)
    assert back.dtype == space.dtype and back.shape == space.shape and back.flags.writeable
    assert back.tobytes() == value.tobytes()
    assert not np.shares_memory(back, np.frombuffer(buf, np.uint8))
    empty = codec.empty()
    assert empty.shape == space.shape and empty.dtype == space.dtype and empty.nbytes == codec.nbytes


@settings(max_examples=200, deadline=None)
@given(n=st.one_of(st.integers(1, 40), st.integers(P.DISCRETE_TABLE_SIZE - 2, P.DISCRETE_TABLE_SIZE + 2),
                   st.integers(1, 3 * P.DISCRETE_TABLE_SIZE)),
       start=st.integers(-2**40, 2**40),
       value=st.one_of(st.integers(-3, 3 * P.DISCRETE_TABLE_SIZE + 3), st.integers(-2**62, 2**62)))
def test_fixed_codec_discrete_roundtrip_and_range(n, start, value):
    """Discrete values round trip as int64 (from the table of a small space's scalars or not); the judge-side check
    refuses anything outside the space."""
    space = spaces.Discrete(n, start=start)
    codec = P.make_fixed_codec(space)
    value += start
    data = codec.pack(value)
    assert codec.unpack(data, 0) == value and type(codec.unpack(data, 0)) is space.dtype.type
    if start <= value < start + n:
        action = codec.check(data, 0)
        assert action == value and action in space and type(action) is space.dtype.type
    else:
        with pytest.raises(P.ProtocolError) as err:
            codec.check(data, 0)
        assert err.value.code == "invalid_action"


@pytest.mark.parametrize("space, good, bad", [
    (spaces.Box(-1.0, 1.0, (2,), np.float32), np.array([0.5, -1], np.float32), np.array([np.nan, 0], np.float32)),
    (spaces.Box(-1.0, 1.0, (2,), np.float32), np.array([1, 1], np.float32), np.array([1.5, 0], np.float32)),
    (spaces.MultiDiscrete([3, 4]), np.array([2, 3]), np.array([3, 0])),
    (spaces.MultiBinary(3), np.array([0, 1, 1], np.int8), np.array([0, 2, 1], np.int8)),
])
def test_fixed_codec_check_refuses_values_outside_the_space(space, good, bad):
    """The judge-side check of array actions is the space's own ``contains`` on the decoded value."""
    codec = P.make_fixed_codec(space)
    assert codec.check(codec.pack(good), 0) in space
    with pytest.raises(P.ProtocolError) as err:
        codec.check(codec.pack(bad), 0)
    assert err.value.code == "invalid_action"


def test_fixed_codec_falls_back_for_other_forms():
    """Values not in the exact wire form, and spaces without a fixed layout, are left to msgpack."""
    box = P.make_fixed_codec(spaces.Box(-1.0, 1.0, (2,), np.float32))
    assert box.pack(np.zeros(2, np.float64)) is None and box.pack([0.0, 0.0]) is None
    assert box.pack(np.zeros(3, np.float32)) is None
    disc = P.make_fixed_codec(spaces.Discrete(3))
    assert disc.pack(True) is None and disc.pack(1.0) is None and disc.pack("1") is None
    assert disc.pack(2**64) is None and disc.pack(np.int8(2)) == struct.pack("<q", 2)
    assert P.make_fixed_codec(spaces.Tuple((spaces.Discrete(2),))) is None
    assert P.make_fixed_codec(spaces.Dict({"a": spaces.Discrete(2)})) is None
    assert P.make_fixed_codec(spaces.Box(0, 1, (2,), np.dtype(">f4"))) is None


# ---- raw binary frames against a real judge ------------------------------------------------------
@pytest.fixture(scope="module")
def judge():
    """A CartPole judge subprocess with a 4 KiB message limit and a raw DEALER socket."""
    proc, address = spawn_judge("CartPole-v1", extra_args=["--max-message-bytes", "4096"])
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 5000)
    sock.connect(address)
    try:
        yield proc, address, sock
    finally:
        sock.close(0)
        stop_judge(proc)


def hello(sock: zmq.Socket) -> tuple[str, bytes]:
    sock.send_multipart(P.encode({"t": "hello", "v": P.PROTOCOL_VERSION, "s": 0}))
    welcome = P.decode(sock.recv_multipart())
    assert welcome["bin"] == 1
    return welcome["k"], bytes.fromhex(welcome["k"])


def call_bin(sock: zmq.Socket, frames: list[bytes]) -> tuple[str, object]:
    """Send raw frames; return ('bin', (tag, flags, seq, reward, obs)) or ('msgpack', header)."""
    sock.send_multipart(frames)
    reply = sock.recv_multipart()
    if reply[0][:1] == b"\xc1":
        tag, flags, seq, reward = P.BIN_REP.unpack_from(reply[0])
        assert len(reply) == 1 and len(reply[0]) == P.BIN_REP.size + 16
        return "bin", (tag, flags, seq, reward, np.frombuffer(reply[0], np.float32, 4, P.BIN_REP.size))
    return "msgpack", P.decode(reply)


def step_frame(seq: int, token: bytes, action: int, flags: int = 0) -> bytes:
    return P.BIN_REQ.pack(P.BIN_STEP, flags, seq, token) + struct.pack("<q", action)


def error_code(result: tuple[str, object], seq: int | None = None) -> str:
    kind, reply = result
    assert kind == "msgpack" and reply["t"] == "error", reply
    if seq is not None:
        assert reply["s"] == seq
    return reply["code"]


def test_binary_requests_get_typed_errors_and_change_nothing(judge):
    """Every check of the msgpack step/reset holds for binary frames, each failure a typed error reply."""
    proc, _, sock = judge
    token, raw = hello(sock)
    assert error_code(call_bin(sock, [step_frame(1, raw, 0)]), 1) == "step_before_reset"
    assert error_code(call_bin(sock, [step_frame(1, b"\0" * 16, 0)]), 1) == "unknown_token"
    assert error_code(call_bin(sock, [P.BIN_REQ.pack(P.BIN_RESET, P.FLAG_SEED, 2, raw)
                                      + P.BIN_SEED.pack(-1)]), 2) == "malformed"
    kind, reset = call_bin(sock, [P.BIN_REQ.pack(P.BIN_RESET, P.FLAG_SEED, 2, raw) + P.BIN_SEED.pack(5)])
    local = gym.make("CartPole-v1")
    assert kind == "bin" and reset[0] == P.BIN_RESET_REPLY and reset[2] == 2
    assert np.array_equal(reset[4], local.reset(seed=5)[0])
    assert error_code(call_bin(sock, [step_frame(3, raw, 2)]), 3) == "invalid_action"
    assert error_code(call_bin(sock, [step_frame(3, raw, -1)]), 3) == "invalid_action"
    assert error_code(call_bin(sock, [step_frame(3, raw, 0)[:-1]]), 3) == "malformed"
    assert error_code(call_bin(sock, [step_frame(3, raw, 0) + b"\0"]), 3) == "malformed"
    assert error_code(call_bin(sock, [step_frame(3, raw, 0), b"x"])) == "malformed"
    assert error_code(call_bin(sock, [step_frame(3, raw, 0), b"\0" * 5000])) == "too_large"
    assert error_code(call_bin(sock, [step_frame(3, raw, 0) + b"\0" * 5000])) == "too_large"
    assert error_code(call_bin(sock, [b"\xc1S" + b"\0" * 10])) == "malformed"
    assert error_code(call_bin(sock, [b"\xc1"])) == "malformed"
    assert error_code(call_bin(sock, [P.BIN_REQ.pack(b"\xc1Z", 0, 3, raw)]), 3) == "unknown_type"
    kind, first = call_bin(sock, [step_frame(3, raw, 1)])
    assert kind == "bin" and first[0] == P.BIN_STEP_REPLY and first[2] == 3 and first[3] == 1.0
    assert np.array_equal(first[4], local.step(1)[0])
    assert error_code(call_bin(sock, [step_frame(3, raw, 1)]), 3) == "duplicate_step"
    kind, replay = call_bin(sock, [step_frame(3, raw, 1, P.FLAG_RETRY)])
    assert kind == "bin" and np.array_equal(replay[4], first[4]) and replay[2] == 3
    kind, second = call_bin(sock, [step_frame(4, raw, 0)])
    assert kind == "bin" and np.array_equal(second[4], local.step(0)[0])
    # the msgpack requests and the binary ones share one sequence and one episode
    sock.send_multipart(P.encode({"t": "step", "k": token, "s": 4, "a": 0}))
    assert P.decode(sock.recv_multipart())["code"] == "duplicate_step"
    sock.send_multipart(P.encode({"t": "step", "k": token, "s": 5, "a": 1}))
    assert np.array_equal(P.decode(sock.recv_multipart())["o"], local.step(1)[0])
    sock.send_multipart(P.encode({"t": "close", "k": token, "s": 6}))
    assert P.decode(sock.recv_multipart())["t"] == "closed"
    assert error_code(call_bin(sock, [step_frame(7, raw, 0)]), 7) == "unknown_token"
    assert proc.poll() is None


@st.composite
def binary_frames(draw, token: bytes):
    """Binary-looking request frames: valid or random headers, any flags and sequence numbers, bad sizes."""
    tag = draw(st.sampled_from([P.BIN_STEP, P.BIN_RESET, b"\xc1s", b"\xc1\0"]))
    flags = draw(st.integers(0, 255))
    seq = draw(st.integers(-2**63, 2**63 - 1))
    tok = draw(st.just(token) | st.binary(min_size=16, max_size=16))
    frame = P.BIN_REQ.pack(tag, flags, seq, tok) + draw(st.binary(max_size=20))
    cut = draw(st.none() | st.integers(1, len(frame)))
    frames = [frame if cut is None else frame[:cut]]
    return frames + draw(st.lists(st.binary(max_size=8), max_size=2))


_FUZZ: dict[str, bytes] = {}


@pytest.mark.timeout(300)
@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_judge_survives_random_binary_frames(judge, data):
    """Random binary frames each get exactly one well-formed reply; the judge stays up."""
    proc, _, sock = judge
    if "token" not in _FUZZ:
        _, _FUZZ["token"] = hello(sock)
        call_bin(sock, [P.BIN_REQ.pack(P.BIN_RESET, 0, 1, _FUZZ["token"])])
    kind, reply = call_bin(sock, data.draw(binary_frames(_FUZZ["token"])))
    if kind == "bin":
        assert reply[0] in (P.BIN_STEP_REPLY, P.BIN_RESET_REPLY)
    else:
        assert reply["t"] == "error" and reply["code"] in {
            "malformed", "too_large", "unknown_token", "unknown_type", "invalid_action", "step_before_reset",
            "duplicate_step", "duplicate_reset", "needs_reset"}
    assert proc.poll() is None


def test_remote_env_after_binary_fuzzing_uses_the_binary_path(judge):
    """A well-formed RemoteEnv still plays whole episodes on the fuzzed judge, over binary frames."""
    proc, address, _ = judge
    env, local = RemoteEnv(address, timeout=10), gym.make("CartPole-v1")
    try:
        assert env._bin_act is not None and env._bin_obs is not None
        obs, info = env.reset(seed=11)
        assert np.array_equal(obs, local.reset(seed=11)[0]) and info == {}
        for t in range(100):
            step = env.step(t % 3 == 0)  # a bool action goes the msgpack way, ints the binary way
            ref = local.step(int(t % 3 == 0))
            assert np.array_equal(step[0], ref[0]) and step[1:4] == (float(ref[1]), ref[2], ref[3])
            assert step[0].flags.writeable and step[0].dtype == np.float32
            if step[2] or step[3]:
                assert np.array_equal(env.reset(seed=t)[0], local.reset(seed=t)[0])
    finally:
        env.close()
        local.close()
    assert proc.poll() is None


class FrameObsEnv(gym.Env):
    """An env with Atari-sized uint8 observations (each in its own reply frame) and Box actions."""

    metadata = {"render_modes": []}

    def __init__(self, info: bool = False) -> None:
        self.observation_space = spaces.Box(0, 255, (84, 84, 4), np.uint8)
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.info = info
        self._rng = np.random.default_rng(0)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._rng = np.random.default_rng(seed)
        self.t = 0
        return self._rng.integers(0, 256, (84, 84, 4), dtype=np.uint8), ({"opt": options} if options else {})

    def step(self, action):
        self.t += 1
        obs = self._rng.integers(0, 256, (84, 84, 4), dtype=np.uint8)
        return obs, float(action.sum()), False, self.t >= 5, ({"t": self.t} if self.info else {})


@pytest.mark.parametrize("info", [False, True])
def test_large_observations_and_box_actions(info):
    """Big observations arrive intact in fresh arrays owning their data; infos and odd actions fall back."""
    address = serve(FrameObsEnv, env_kwargs={"info": info})
    try:
        env, local = RemoteEnv(address, timeout=10), FrameObsEnv(info)
        assert env._bin_act is not None and env._obs_frame
        o1, _ = env.reset(seed=3)
        assert np.array_equal(o1, local.reset(seed=3)[0]) and o1.flags.owndata and o1.flags.writeable
        for action in (np.array([0.5, -0.25], np.float32), np.array([0.5, 0.5]), [0.25, 0.25]):
            o2, r, te, tr, i = env.step(action)
            ref = local.step(np.asarray(action, np.float32))
            assert np.array_equal(o2, ref[0]) and r == ref[1] and (te, tr) == (ref[2], ref[3]) and i == ref[4]
            assert o2 is not o1 and not np.shares_memory(o1, o2) and o2.dtype == np.uint8
        for bad in (np.array([2.0, 0.0], np.float32), np.array([np.nan, 0.0], np.float32), np.array([2.0, 0.0])):
            with pytest.raises(RemoteError) as err:
                env.step(bad)
            assert err.value.code == "invalid_action"
        obs, info_ = env.reset(seed=4, options={"x": 1})  # options go the msgpack way
        assert np.array_equal(obs, local.reset(seed=4)[0]) and info_ == {"opt": {"x": 1}}
        env.close()
    finally:
        shutdown(address)


def quiet_pennies():
    """MatchingPennies without infos, so that its replies to binary requests are binary too."""
    from tests.test_remote_multi import MatchingPennies

    class QuietPennies(MatchingPennies):
        def reset(self, seed=None, options=None):
            obs, infos = super().reset(seed=seed, options=options)
            return obs, {a: {} for a in infos}

        def step(self, actions):
            *out, infos = super().step(actions)
            return (*out, {a: {} for a in infos})
    return QuietPennies()


def test_multi_judge_binary_barrier_mixes_with_msgpack_clients():
    """The multi-agent judge serves binary steps through its barrier, beside msgpack clients, with the same checks."""
    address = serve(quiet_pennies, multi=True, client_timeout=5.0, allow_claim=True)
    socks = []
    for _ in range(2):
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVTIMEO, 5000)
        sock.connect(address)
        socks.append(sock)
    a, b = socks
    try:
        ka, raw_a = hello(a)
        kb, _ = hello(b)
        assert error_code(call_bin(a, [step_frame(1, raw_a, 0)]), 1) == "step_before_reset"
        assert error_code(call_bin(a, [step_frame(1, b"\1" * 16, 0)]), 1) == "unknown_token"
        a.send(P.BIN_REQ.pack(P.BIN_RESET, P.FLAG_SEED, 2, raw_a) + P.BIN_SEED.pack(3))
        b.send_multipart(P.encode({"t": "reset", "k": kb, "s": 1}))
        reset_a = a.recv_multipart()
        assert P.BIN_REP.unpack_from(reset_a[0])[:3] == (P.BIN_RESET_REPLY, 0, 2)
        assert P.decode(b.recv_multipart())["t"] == "reset"
        assert error_code(call_bin(a, [step_frame(3, raw_a, 5)]), 3) == "invalid_action"
        assert error_code(call_bin(a, [step_frame(3, raw_a, 1)[:-2]]), 3) == "malformed"
        a.send(step_frame(3, raw_a, 1))  # waits at the barrier
        assert error_code(call_bin(a, [step_frame(4, raw_a, 0)]), 4) == "duplicate_step"
        b.send_multipart(P.encode({"t": "step", "k": kb, "s": 2, "a": 1}))
        ra = a.recv_multipart()
        rb = P.decode(b.recv_multipart())
        tag, flags, seq, reward = P.BIN_REP.unpack_from(ra[0])
        obs_a = np.frombuffer(ra[0], np.float32, 4, P.BIN_REP.size)
        assert (tag, seq, reward, rb["r"]) == (P.BIN_STEP_REPLY, 3, 1.0, -1.0) and obs_a[1] == 1.0
        assert judge_for(address).env.t == 1
        replay = call_bin(a, [step_frame(3, raw_a, 1, P.FLAG_RETRY)])
        assert replay[0] == "bin" and np.array_equal(replay[1][4], obs_a)
        assert judge_for(address)._thread.is_alive()
    finally:
        for sock in socks:
            sock.close(0)
        shutdown(address)


class SurplusJudge(JudgeServer):
    """A judge that breaks the protocol once asked to: its binary step replies carry one frame too many."""

    surplus = False

    def _send_frames(self, envelope: list, frames: list) -> None:
        if self.surplus and frames[0][:2] in (P.BIN_STEP_REPLY, P.BIN_VSTEP_REPLY):
            frames = [*frames, b"surplus"]
        super()._send_frames(envelope, frames)


@pytest.mark.parametrize("make_env, framed", [(lambda a: RemoteEnv(a, timeout=5, lane=False), False),
                                               (lambda a: RemoteEnv(a, timeout=5, lane=False), True),
                                               (lambda a: RemoteVecEnv(a, 2, timeout=5, lane=False), False)])
def test_a_reply_with_a_surplus_frame_is_refused_at_the_next_request(make_env, framed):
    """A reply's end is checked after the next request went out (off the round trip): the observation read was whole,
    and the next step or reset says ``malformed``; a client never reads a surplus frame as a reply."""
    judge = SurplusJudge(FrameObsEnv if framed else lambda: gym.make("CartPole-v1"), lane=False)
    address = judge.start()
    env = make_env(address)
    try:
        env.reset(seed=1)
        assert env.step(env.action_space.sample()) is not None
        judge.surplus = True
        obs = env.step(env.action_space.sample())[0]
        assert obs.shape == env.observation_space.shape and obs in env.observation_space
        for call in (lambda: env.step(env.action_space.sample()), lambda: env.reset(seed=2)):
            judge.surplus = True
            with pytest.raises(P.ProtocolError) as err:
                call()
            assert err.value.code == "malformed" and "more frames" in err.value.message
    finally:
        env.close()
        judge.stop()
