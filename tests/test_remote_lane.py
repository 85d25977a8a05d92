"""The same-host lane: clients of a loopback judge step through its Unix socket, fall back to ZeroMQ when it breaks,
and the judge survives whatever is written to it."""
from __future__ import annotations

import os
import socket
import stat
import struct

import gymnasium as gym
import numpy as np
import pytest
import zmq

from slm_lab_like.remote import RemoteEnv, judge_for, serve, shutdown, spawn_judge, stop_judge
from slm_lab_like.remote import lane as L
from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.vector_client import RemoteVecEnv

pytestmark = pytest.mark.timeout(60)


def same_steps(remote: gym.Env, local: gym.Env, n: int, seed: int) -> None:
    """Step both with the same actions and assert the same transitions (resetting together)."""
    assert np.array_equal(remote.reset(seed=seed)[0], local.reset(seed=seed)[0])
    for a in np.random.default_rng(seed).integers(2, size=n):
        r, lo = remote.step(int(a)), local.step(int(a))
        assert np.array_equal(r[0], lo[0]) and r[1:4] == (float(lo[1]), lo[2], lo[3])
        if r[2] or r[3]:
            assert np.array_equal(remote.reset()[0], local.reset()[0])


def lane_names() -> set[str]:
    """The abstract Unix socket names this host has open (Linux's /proc/net/unix writes them with an '@')."""
    with open("/proc/net/unix") as f:
        return {line.split()[-1] for line in f if line.split()[-1].startswith("@")}


def test_clients_take_the_lane_and_fall_back_to_zeromq_when_it_breaks(monkeypatch):
    monkeypatch.setattr(L, "ABSTRACT", False)  # the lane in a private directory, as systems other than Linux get it
    address = serve("CartPole-v1")
    try:
        lane_dir = os.path.dirname(judge_for(address)._lane.path)
        assert stat.S_IMODE(os.stat(lane_dir).st_mode) == 0o700
        env, plain = RemoteEnv(address, timeout=5), RemoteEnv(address, timeout=5, lane=False)
        vector = RemoteVecEnv(address, 2, timeout=5)
        assert env._link.lane is not None and vector._link.lane is not None and plain._link.lane is None
        same_steps(env, gym.make("CartPole-v1"), 50, seed=1)
        env._link.lane.sock.shutdown(socket.SHUT_RDWR)  # the lane breaks under the client
        same_steps(env, gym.make("CartPole-v1"), 50, seed=2)
        assert env._link.lane is None
        same_steps(plain, gym.make("CartPole-v1"), 20, seed=3)
        vector.reset(seed=0)
        assert vector.step(np.array([0, 1]))[0].shape == (2, 4)
        for client in (env, plain, vector):
            client.close()
    finally:
        shutdown(address)
    assert not os.path.exists(lane_dir)


def test_a_lane_client_that_connects_late_is_let_in_while_the_judge_waits_on_zeromq(monkeypatch):
    """With no lane connection open the judge waits on ZeroMQ alone; a client connecting to the lane after the
    welcome's window is still let in (the loop looks for one every LANE_LOOK seconds) and steps by the lane."""
    from slm_lab_like.remote import base

    monkeypatch.setattr(base, "LANE_WAIT", 0.0)  # every lane client comes late
    address = serve("CartPole-v1")
    try:
        plain = RemoteEnv(address, timeout=5, lane=False)
        same_steps(plain, gym.make("CartPole-v1"), 20, seed=4)  # served by the ZeroMQ-only wait
        env = RemoteEnv(address, timeout=5)
        assert env._link.lane is not None
        same_steps(env, gym.make("CartPole-v1"), 50, seed=5)
        assert env._link.lane is not None and len(judge_for(address)._lane.conns) == 1
        same_steps(plain, gym.make("CartPole-v1"), 20, seed=6)  # both ways at once
        env.close()
        plain.close()
    finally:
        shutdown(address)


linux_only = pytest.mark.skipif(not L.ABSTRACT, reason="the abstract socket namespace is Linux's")


@linux_only
def test_a_killed_judge_leaves_nothing_of_its_lane_behind():
    """On Linux the lane is an abstract name: nothing on disk, and the name is gone once the judge is, even killed
    (SIGKILL: no clean-up of its own runs)."""
    proc, address = spawn_judge("CartPole-v1")
    try:
        env = RemoteEnv(address, timeout=5)
        name = env._link.lane.sock.getpeername()
        assert isinstance(name, bytes) and name.startswith(b"\0judge-lane-")
        same_steps(env, gym.make("CartPole-v1"), 20, seed=6)
        assert "@" + name[1:].decode() in lane_names()
        proc.kill()
        proc.wait(10)
        assert "@" + name[1:].decode() not in lane_names()
        env.close()
    finally:
        stop_judge(proc)


@linux_only
def test_an_abstract_lane_lets_in_only_its_own_user(monkeypatch):
    """An abstract name has no file permissions: the judge closes a lane connection from another user's process, and
    that client goes on over ZeroMQ (which checks its token as ever)."""
    address = serve("CartPole-v1")
    try:
        lane = judge_for(address)._lane
        assert lane.dir is None and lane.path.startswith("\0judge-lane-")
        mine = RemoteEnv(address, timeout=5)
        same_steps(mine, gym.make("CartPole-v1"), 10, seed=7)
        assert mine._link.lane is not None and len(lane.conns) == 1
        monkeypatch.setattr(L, "peer_cred", lambda sock: (os.getpid() + 1, os.getuid() + 1))  # as another user sees it
        other = RemoteEnv(address, timeout=5)
        same_steps(other, gym.make("CartPole-v1"), 10, seed=8)
        assert other._link.lane is None and len(lane.conns) == 1
        for env in (mine, other):
            env.close()
    finally:
        shutdown(address)


def test_own_user_needs_the_peers_credentials(monkeypatch):
    a, b = socket.socketpair(socket.AF_UNIX)
    try:
        assert L.own_user(a) == (L.peer_cred(a) is not None)
        monkeypatch.setattr(L, "peer_cred", lambda sock: None)  # an OS that does not say who the peer is
        assert not L.own_user(a)
    finally:
        a.close()
        b.close()


def test_an_encrypted_judge_offers_no_lane():
    public, secret = zmq.curve_keypair()
    address = serve("CartPole-v1", curve_secret_key=secret)
    try:
        env = RemoteEnv(address, timeout=5, curve_server_key=public)
        assert judge_for(address)._lane is None and env._link.lane is None
        env.close()
    finally:
        shutdown(address)


def lane_socket(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5)
    sock.connect(path)
    return sock


def test_the_judge_survives_whatever_is_written_to_its_lane():
    """Garbage, broken framing, oversized lengths, bad tokens, half messages and many connections: the judge
    answers what is well framed with typed errors, drops the rest, and still serves a client."""
    proc, address = spawn_judge("CartPole-v1", extra_args=["--max-message-bytes", "4096"])
    try:
        probe = RemoteEnv(address, timeout=5)
        path = probe._link.lane.sock.getpeername()
        bad_token = L.pack([P.BIN_REQ.pack(P.BIN_STEP, 0, 1, b"\1" * 16) + struct.pack("<q", 0)])
        sock = lane_socket(path)
        sock.sendall(bad_token)
        reply = P.decode(L.unpack(sock.recv(65536)[4:]))
        assert (reply["t"], reply["code"]) == ("error", "unknown_token")
        sock.sendall(L.pack([b"\x93\x01"]))  # not msgpack for a header
        assert P.decode(L.unpack(sock.recv(65536)[4:]))["code"] == "malformed"
        for junk in (b"\xff" * 64, struct.pack("<I", 1 << 30) + b"x", struct.pack("<IH", 2, 0),
                     struct.pack("<IHI", 10, 1, 999) + b"abcd"):
            conn = lane_socket(path)
            conn.sendall(junk)
            assert conn.recv(16) == b""  # dropped
            conn.close()
        half = lane_socket(path)
        half.sendall(bad_token[:7])
        many = [lane_socket(path) for _ in range(100)]
        half.close()
        for conn in many:
            conn.close()
        sock.close()
        same_steps(probe, gym.make("CartPole-v1"), 30, seed=4)
        probe.close()
        assert proc.poll() is None
    finally:
        stop_judge(proc)


def test_spinning_ends_serve_the_same_steps():
    """A judge and a client that poll instead of sleeping (spin) give the same transitions."""
    proc, address = spawn_judge("CartPole-v1", spin=0.001)
    try:
        env = RemoteEnv(address, timeout=5, spin=0.0005)
        assert env._link.lane.spin == 0.0005
        same_steps(env, gym.make("CartPole-v1"), 60, seed=5)
        vector = RemoteVecEnv(address, 3, timeout=5, spin=0.0005)
        vector.reset(seed=1)
        assert vector.step(np.array([1, 0, 1]))[0].shape == (3, 4)
        env.close()
        vector.close()
    finally:
        stop_judge(proc)
