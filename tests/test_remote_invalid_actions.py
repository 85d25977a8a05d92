"""Every malformed action gets the typed error ``invalid_action`` (never ``internal``) from the single-agent and
the multi-agent judges, over msgpack and binary requests, and the judge logs no traceback for any of them."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

import gymnasium as gym
import msgpack
import numpy as np
import pytest
import zmq
from gymnasium import spaces
from pettingzoo import ParallelEnv

from slm_lab_like.envs.games.connect_four import ConnectFourEnv
from slm_lab_like.remote import judge_for, serve, shutdown
from slm_lab_like.remote import protocol as P

pytestmark = pytest.mark.timeout(60)

ACTION_SPACES = {
    "discrete": spaces.Discrete(5),
    "box": spaces.Box(-1.0, 1.0, (2,), np.float32),
    "box_int8": spaces.Box(-5, 5, (2,), np.int8),
    "multidiscrete": spaces.MultiDiscrete([3, 4]),
    "multibinary": spaces.MultiBinary(3),
    "tuple": spaces.Tuple((spaces.Discrete(2), spaces.Box(-1.0, 1.0, (2,), np.float32))),
    "dict": spaces.Dict({"move": spaces.Discrete(3), "force": spaces.Box(-1.0, 1.0, (1,), np.float32)}),
}


def inline_array(dtype: str, shape: list[int], data: bytes) -> msgpack.ExtType:
    """An array as the wire carries it inline (dtype, shape, raw bytes), whatever those say."""
    return msgpack.ExtType(2, msgpack.packb([dtype, shape, data], use_bin_type=True))


def nested(depth: int) -> list:
    value: Any = 0.0
    for _ in range(depth):
        value = [value]
    return value


NAN = float("nan")
MALFORMED = {
    "list of strings": ["a", "b"],
    "ragged list": [[1.0], [1.0, 2.0]],
    "list holding a map": [{"x": 1}, 0],
    "list holding bytes": [b"\x01", 0],
    "nested lists too deep": [[[[0, 0]]]],
    "lists nested 40 deep": nested(40),
    "NaN": NAN,
    "NaNs": [NAN, NAN],
    "out-of-range int": 2**64 - 1,
    "most negative int": -2**63,
    "out-of-range ints": [2**63, -2**63],
    "dtype string": "float32",
    "dtype strings": ["<f4", "<i8"],
    "object-dtype array": inline_array("|O", [2], b"\0" * 16),
    "unicode-dtype array": inline_array("<U2", [2], b"\0" * 16),
    "array of the wrong size": inline_array("<f4", [2], b"\0" * 3),
    "complex numbers": np.array([1 + 2j, 0], np.complex64),
    "complex scalar": np.array(1j, np.complex128),
    "numeric strings": ["1", "0"],
    "numeric string": "1",
    "nil": None,
    "boolean": True,
    "map": {"a": 1},
    "bytes": b"\x00\x01",
    "empty list": [],
    "map holding a numeric string": {"move": "1", "force": [0.5]},
    "map holding complex numbers": {"move": 1, "force": np.array([1j], np.complex64)},
}

# binary step payloads outside the action space (the fixed raw layout of each space)
BINARY_MALFORMED = {
    "discrete": [5, -1, 2**63 - 1, -2**63],
    "box": [[NAN, 0.0], [np.inf, 0.0], [2.0, 0.0], [-np.inf, NAN]],
    "box_int8": [[6, 0], [-128, 0]],
    "multidiscrete": [[3, 0], [-1, 0], [2**62, 0]],
    "multibinary": [[2, 0, 0], [-1, 0, 0]],
}


class ActionEnv(gym.Env):
    """Box observations, any action space; one long episode."""

    def __init__(self, kind: str) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = ACTION_SPACES[kind]

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        assert action in self.action_space
        return np.zeros(2, np.float32), 0.0, False, False, {}


class TwoSpaces(ParallelEnv):
    """Two players acting at once, one with a Box and one with a MultiDiscrete action space."""

    metadata = {"name": "two_spaces_v0"}

    def __init__(self) -> None:
        self.possible_agents = ["box", "multidiscrete"]
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(-1.0, 1.0, (2,), np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        return ACTION_SPACES[agent]

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.agents = list(self.possible_agents)
        return {a: np.zeros(2, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        assert all(actions[a] in ACTION_SPACES[a] for a in self.agents)
        zeros = {a: 0.0 for a in self.agents}
        return ({a: np.zeros(2, np.float32) for a in self.agents}, zeros, {a: False for a in self.agents},
                {a: False for a in self.agents}, {a: {} for a in self.agents})


class Wire:
    """A bare DEALER client of one token, numbering its requests."""

    def __init__(self, address: str, token: str | None = None) -> None:
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.RCVTIMEO, 5000)
        self.sock.connect(address)
        self.seq = 0
        self.token = self.call({"t": "hello", "v": P.PROTOCOL_VERSION, "k": token})["k"]

    def call(self, header: dict) -> dict:
        header = {"k": getattr(self, "token", None), **header, "s": self.seq}
        self.seq += 1
        self.sock.send_multipart(P.encode(header))
        return P.decode(self.sock.recv_multipart())

    def call_binary(self, payload: bytes) -> dict:
        seq, self.seq = self.seq, self.seq + 1
        self.sock.send(P.BIN_REQ.pack(P.BIN_STEP, 0, seq, bytes.fromhex(self.token)) + payload)
        reply = self.sock.recv_multipart()
        assert reply[0][:1] != b"\xc1", "a binary step reply to a malformed action"
        return P.decode(reply)

    def close(self) -> None:
        self.sock.close(0)


def refuses_every_malformed_action(wire: Wire, kind: str) -> None:
    """Each malformed encoding, by msgpack and (where the space has a raw layout) binary: invalid_action."""
    for label, value in MALFORMED.items():
        reply = wire.call({"t": "step", "a": value})
        assert (reply["t"], reply.get("code")) == ("error", "invalid_action"), (kind, label, reply)
    space = ACTION_SPACES[kind]
    for value in BINARY_MALFORMED.get(kind, []):
        reply = wire.call_binary(np.asarray(value).astype(space.dtype if kind != "discrete" else "<i8").tobytes())
        assert (reply["t"], reply.get("code")) == ("error", "invalid_action"), (kind, value, reply)
    good = wire.call({"t": "step", "a": P.to_wire(space, space.sample())})
    assert good["t"] == "step", (kind, good)


def assert_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    bad = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not bad and "Traceback" not in caplog.text, [r.getMessage() for r in bad]


@pytest.mark.parametrize("kind", sorted(ACTION_SPACES))
def test_single_agent_judge(caplog, kind):
    """A single-agent judge of each action space answers every malformed action with invalid_action."""
    caplog.set_level(logging.DEBUG)
    address = serve(partial(ActionEnv, kind))
    wire = Wire(address)
    try:
        assert wire.call({"t": "reset"})["t"] == "reset"
        refuses_every_malformed_action(wire, kind)
        assert judge_for(address).errors_sent == len(MALFORMED) + len(BINARY_MALFORMED.get(kind, []))
    finally:
        wire.close()
        shutdown(address)
    assert_no_traceback(caplog)


def test_multi_agent_judge_parallel(caplog):
    """Both bodies of a parallel env (Box and MultiDiscrete actions) refuse every malformed action."""
    caplog.set_level(logging.DEBUG)
    address = serve(TwoSpaces, multi=True, client_timeout=5.0)
    tokens = judge_for(address).tokens
    wires = {name: Wire(address, token) for name, token in tokens.items()}
    try:
        for wire in wires.values():
            assert wire.call({"t": "reset"})["t"] == "reset"
        for name, wire in wires.items():
            for label, value in MALFORMED.items():
                reply = wire.call({"t": "step", "a": value})
                assert reply.get("code") == "invalid_action", (name, label, reply)
            space = ACTION_SPACES[name]
            for value in BINARY_MALFORMED[name]:
                assert wire.call_binary(np.asarray(value).astype(space.dtype).tobytes())["code"] == "invalid_action"
    finally:
        for wire in wires.values():
            wire.close()
        shutdown(address)
    assert_no_traceback(caplog)


def test_multi_agent_judge_turn_based(caplog):
    """The player on turn in connect four (Discrete(7), Dict observations) refuses every malformed action,
    and its valid move still goes through afterwards."""
    caplog.set_level(logging.DEBUG)
    address = serve(ConnectFourEnv, multi=True, client_timeout=5.0, join_timeout=0.0)
    tokens = judge_for(address).tokens
    wire = Wire(address, tokens["player_0"])
    try:
        assert wire.call({"t": "reset"})["t"] == "reset"
        for label, value in {**MALFORMED, "column 7": 7, "column -1": -1, "float column": 3.0}.items():
            reply = wire.call({"t": "step", "a": value})
            assert reply.get("code") == "invalid_action", (label, reply)
        assert judge_for(address).env.game.num_moves == 0
    finally:
        wire.close()
        shutdown(address)
    assert_no_traceback(caplog)


@pytest.mark.parametrize("action", [1.5, "1", np.bool_(True), np.array(1.0), np.array([1]), [0], (0,), None, np.float32(2.0),
                                    2**70])
def test_remote_env_never_rounds_a_discrete_action_the_judge_would_refuse(action: Any) -> None:
    """RemoteEnv sends what it is given: an action that is not an integer is the judge's invalid_action, as
    gymnasium's Discrete.contains would refuse it, never rounded to one; integers of every kind (a Python bool too, as
    gymnasium takes it) still play."""
    from slm_lab_like.remote import RemoteEnv
    from slm_lab_like.remote.protocol import RemoteError

    address = serve("Acrobot-v1")
    env = RemoteEnv(address, timeout=5)
    try:
        env.reset(seed=0)
        with pytest.raises(RemoteError, match="invalid_action"):
            env.step(action)
        for good in (1, np.int64(2), np.array(0), np.uint8(1), True):
            env.step(good)
    finally:
        env.close()
        shutdown(address)


def test_a_step_without_its_action_field_says_so() -> None:
    address = serve("CartPole-v1")
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.RCVTIMEO, 5000)
    sock.connect(address)
    try:
        sock.send_multipart(P.encode({"t": "hello", "v": P.PROTOCOL_VERSION, "s": 0}))
        token = P.decode(sock.recv_multipart())["k"]
        sock.send_multipart(P.encode({"t": "reset", "k": token, "s": 1}))
        sock.recv_multipart()
        sock.send_multipart(P.encode({"t": "step", "k": token, "s": 2}))
        reply = P.decode(sock.recv_multipart())
        assert reply["code"] == "malformed" and "field 'a'" in reply["msg"]
    finally:
        sock.close(0)
        shutdown(address)
