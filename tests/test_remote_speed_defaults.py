"""The judge's speed defaults keep their promises: spins only for a peer in another process, bounded (an idle
judge sleeps), and the one-shot check of a vector step's Discrete actions refuses what the per-copy check did."""
from __future__ import annotations

import os
import socket
import sys
import time

import gymnasium as gym
import numpy as np
import pytest

from slm_lab_like.remote import RemoteEnv, serve, shutdown, spawn_judge, stop_judge
from slm_lab_like.remote import lane as L
from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.vector_client import RemoteVecEnv

pytestmark = pytest.mark.timeout(60)


def _cpu_seconds(pid: int) -> float:
    """CPU seconds used so far by every thread of process ``pid`` (Linux /proc)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            total += int(f.read().split()[0])
    return total / 1e9


def test_vector_discrete_actions_are_checked_in_one_go():
    """Every copy's action is checked: one out of range anywhere is invalid_action; the rest come back as ints."""
    codec = P.make_vector_codec(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(3, start=-1), 4)
    assert codec is not None
    head = b"\0" * 8
    assert codec.unpack_actions(head + np.array([-1, 0, 1, 0], "<i8").tobytes(), 8) == [-1, 0, 1, 0]
    for bad in ([0, 0, 0, 2], [-2, 0, 0, 0], [0, 2**40, 0, 0]):
        with pytest.raises(P.ProtocolError, match="invalid_action"):
            codec.unpack_actions(head + np.array(bad, "<i8").tobytes(), 8)
    with pytest.raises(P.ProtocolError, match="malformed"):
        codec.unpack_actions(head + np.zeros(3, "<i8").tobytes(), 8)


def test_other_process_tells_a_peer_in_this_process_apart():
    a, b = socket.socketpair(socket.AF_UNIX)
    try:
        assert not L.other_process(a) and not L.other_process(b)
    finally:
        a.close()
        b.close()


def test_a_client_spins_by_default_only_for_a_judge_in_another_process():
    """In-process judges would only lose the GIL to a spinning client; a judge process gets the default spin."""
    address = serve("CartPole-v1")
    try:
        env = RemoteEnv(address, timeout=5)
        assert env._link.lane is not None and env._link.lane.spin == 0.0
        env.close()
    finally:
        shutdown(address)
    if not sys.platform.startswith("linux"):
        pytest.skip("SO_PEERCRED is Linux's")
    proc, address = spawn_judge("CartPole-v1")
    try:
        env = RemoteEnv(address, timeout=5)
        explicit = RemoteEnv(address, timeout=5, spin=0.0)
        assert env._link.lane is not None and env._link.lane.spin == L.CLIENT_SPIN
        assert explicit._link.lane is not None and explicit._link.lane.spin == 0.0
        env.close()
        explicit.close()
    finally:
        stop_judge(proc)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_an_idle_judge_sleeps_after_its_client_stepped_fast():
    """The default spins end: once the client stops stepping, the judge process uses next to no CPU."""
    proc, address = spawn_judge("CartPole-v1")
    try:
        vector = RemoteVecEnv(address, 4, timeout=5)
        vector.reset(seed=0)
        actions = np.zeros(4, np.int64)
        for _ in range(300):
            vector.step(actions)
        time.sleep(0.05)
        before = _cpu_seconds(proc.pid)
        time.sleep(0.5)
        assert _cpu_seconds(proc.pid) - before < 0.1
        vector.close()
    finally:
        stop_judge(proc)
