"""Benchmark the remote-env protocol overhead against a bare pyzmq loop (same sockets, same env, same actions).

Prints three ratios (targets in brackets):
  1. RemoteEnv steps/s on CartPole-v1 / bare ROUTER-DEALER loop replying raw bytes        [>= 0.85]
  2. the same with 84x84x4 uint8 observations                                           [>= 0.85]
  3. multi-agent judge with 4 client processes, aggregate body-steps/s
     / 4 independent single-agent judges each with its own client process                 [>= 0.7]
Each measurement runs server and client in separate processes; variants alternate, median of ``--repeats``.
Usage: python bench/remote_overhead.py [--steps 10000] [--repeats 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import struct
import time
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import zmq
from gymnasium import spaces

from slm_lab_like.remote import JudgeServer, MultiJudgeServer, RemoteEnv

CTX = mp.get_context("fork")
SEED = 7


class ImageEnv(gym.Env):
    """Cheap env with 84x84x4 uint8 observations (Atari-sized frames) and 200-step episodes."""

    metadata = {"render_modes": []}

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0, 255, (84, 84, 4), np.uint8)
        self.action_space = spaces.Discrete(4)
        self._frames = np.random.default_rng(0).integers(0, 256, (8, 84, 84, 4), dtype=np.uint8)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Start a 200-step episode."""
        super().reset(seed=seed)
        self._t = 0
        return self._frames[0].copy(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Return the next stored frame."""
        self._t += 1
        return self._frames[self._t % 8].copy(), float(action), False, self._t >= 200, {}


class WalkerEnv(gym.Env):
    """One body of the multi-agent benchmark game, as a single-agent env (4 floats, 2 actions, 200 steps)."""

    metadata = {"render_modes": []}

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self.action_space = spaces.Discrete(2)
        self._state = np.zeros(4, np.float32)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Start an episode at the origin."""
        super().reset(seed=seed)
        self._state[:] = 0
        self._t = 0
        return self._state.copy(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Move one step left or right."""
        self._t += 1
        self._state += 1.0 if action else -1.0
        return self._state.copy(), 1.0, False, self._t >= 200, {}


class WalkersParallel:
    """Four WalkerEnv bodies in one PettingZoo-style parallel env stepped together."""

    metadata = {"name": "walkers_v0"}

    def __init__(self, n: int = 4) -> None:
        self.possible_agents = [f"walker_{i}" for i in range(n)]
        self.agents: list[str] = []
        self._obs_space = spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self._act_space = spaces.Discrete(2)
        self._state = np.zeros((n, 4), np.float32)
        self._t = 0

    def observation_space(self, agent: str) -> spaces.Space:
        """Per-body observation space."""
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        """Per-body action space."""
        return self._act_space

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Start an episode with every walker at the origin."""
        self.agents = list(self.possible_agents)
        self._state[:] = 0
        self._t = 0
        return {a: self._state[i].copy() for i, a in enumerate(self.agents)}, {a: {} for a in self.agents}

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        """Move every walker."""
        self._t += 1
        for i, a in enumerate(self.possible_agents):
            self._state[i] += 1.0 if actions[a] else -1.0
        trunc = self._t >= 200
        obs = {a: self._state[i].copy() for i, a in enumerate(self.agents)}
        out = ({a: 1.0 for a in self.agents}, {a: False for a in self.agents}, {a: trunc for a in self.agents},
               {a: {} for a in self.agents})
        if trunc:
            self.agents = []
        return (obs, *out)

    def close(self) -> None:
        """Nothing to release."""


def _actions(n: int, k: int) -> list[int]:
    return [int(a) for a in np.random.default_rng(SEED).integers(k, size=n)]


# ---- judge side ------------------------------------------------------------------------------
def _judge_proc(factory: Callable, q: Any, multi: bool) -> None:
    judge = MultiJudgeServer(factory, client_timeout=30.0) if multi else JudgeServer(factory)
    q.put(judge.address)
    judge.run()


def _bare_server_proc(factory: Callable, q: Any) -> None:
    env = factory()
    sock = zmq.Context.instance().socket(zmq.ROUTER)
    sock.bind("tcp://127.0.0.1:0")
    q.put(sock.getsockopt_string(zmq.LAST_ENDPOINT))
    pack = struct.Struct("<d??").pack
    while True:
        ident, payload = sock.recv_multipart()
        if payload[:1] == b"s":
            obs, r, te, tr, _ = env.step(payload[1])
            sock.send_multipart([ident, obs.tobytes() + pack(r, te, tr)], copy=False)
        elif payload[:1] == b"r":
            obs, _ = env.reset(seed=int.from_bytes(payload[1:], "little"))
            sock.send_multipart([ident, obs.tobytes()], copy=False)
        else:
            sock.send_multipart([ident, b"bye"])
            break


# ---- client side -----------------------------------------------------------------------------
def _remote_client(address: str, n: int, k: int, q: Any, barrier: Any = None) -> None:
    env = RemoteEnv(address, timeout=60)
    actions = _actions(n, k)
    if barrier is not None:
        barrier.wait()
    t0 = time.perf_counter()
    env.reset(seed=SEED)
    for a in actions:
        _, _, te, tr, _ = env.step(a)
        if te or tr:
            env.reset()
    q.put((n, time.perf_counter() - t0))
    env.close()


def _bare_client(address: str, n: int, k: int, obs_dtype: str, q: Any) -> None:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.connect(address)
    actions = _actions(n, k)
    unpack = struct.Struct("<d??").unpack_from
    dtype = np.dtype(obs_dtype)
    t0 = time.perf_counter()
    sock.send(b"r" + SEED.to_bytes(8, "little"))
    sock.recv()
    for a in actions:
        sock.send(b"s" + bytes([a]))
        buf = sock.recv()
        np.frombuffer(buf, dtype, count=(len(buf) - 10) // dtype.itemsize)
        _, te, tr = unpack(buf, len(buf) - 10)
        if te or tr:
            sock.send(b"r" + b"\0" * 8)
            sock.recv()
    q.put((n, time.perf_counter() - t0))
    sock.send(b"x")
    sock.recv()


def _start(target: Callable, *args: Any) -> mp.Process:
    p = CTX.Process(target=target, args=args, daemon=True)
    p.start()
    return p


def _stop(procs: list[mp.Process]) -> None:
    for p in procs:
        p.join(2)
        if p.is_alive():
            p.kill()
            p.join(2)


def run_remote(factory: Callable, n: int, k: int) -> float:
    """Steps/s of one RemoteEnv client process against one single-agent judge process."""
    q = CTX.Queue()
    server = _start(_judge_proc, factory, q, False)
    address = q.get(timeout=60)
    client = _start(_remote_client, address, n, k, q)
    steps, secs = q.get(timeout=600)
    _stop([client])
    server.kill()
    _stop([server])
    return steps / secs


def run_bare(factory: Callable, n: int, k: int, obs_dtype: str) -> float:
    """Steps/s of the bare pyzmq ROUTER/DEALER loop (server steps the env, replies raw bytes)."""
    q = CTX.Queue()
    server = _start(_bare_server_proc, factory, q)
    address = q.get(timeout=60)
    client = _start(_bare_client, address, n, k, obs_dtype, q)
    steps, secs = q.get(timeout=600)
    _stop([client, server])
    return steps / secs


def run_multi(n: int, bodies: int = 4) -> float:
    """Aggregate body-steps/s of one multi-agent judge with ``bodies`` client processes."""
    q = CTX.Queue()
    barrier = CTX.Barrier(bodies)
    server = _start(_judge_proc, lambda: WalkersParallel(bodies), q, True)
    address = q.get(timeout=60)
    clients = [_start(_remote_client, address, n, 2, q, barrier) for _ in range(bodies)]
    results = [q.get(timeout=600) for _ in clients]
    _stop(clients)
    server.kill()
    _stop([server])
    return sum(s for s, _ in results) / max(t for _, t in results)


def run_independent(n: int, bodies: int = 4) -> float:
    """Aggregate body-steps/s of ``bodies`` single-agent judges, each with its own client process."""
    q = CTX.Queue()
    barrier = CTX.Barrier(bodies)
    servers = [_start(_judge_proc, WalkerEnv, q, False) for _ in range(bodies)]
    addresses = [q.get(timeout=60) for _ in servers]
    clients = [_start(_remote_client, addr, n, 2, q, barrier) for addr in addresses]
    results = [q.get(timeout=600) for _ in clients]
    _stop(clients)
    for s in servers:
        s.kill()
    _stop(servers)
    return sum(s for s, _ in results) / max(t for _, t in results)


def alternate(a: Callable[[], float], b: Callable[[], float], repeats: int) -> tuple[float, float]:
    """Run ``a`` and ``b`` alternately ``repeats`` times each; return their medians."""
    ra, rb = [], []
    for _ in range(repeats):
        ra.append(a())
        rb.append(b())
    return statistics.median(ra), statistics.median(rb)


def main() -> None:
    """Run the three comparisons and print their ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", choices=("cartpole", "image", "multi"), default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    n, reps = args.steps, args.repeats
    report: dict[str, Any] = {"steps": n, "repeats": reps}
    cartpole = lambda: gym.make("CartPole-v1")  # noqa: E731
    if args.only in (None, "cartpole"):
        remote, bare = alternate(lambda: run_remote(cartpole, n, 2), lambda: run_bare(cartpole, n, 2, "<f4"), reps)
        report["cartpole"] = {"remote_sps": remote, "bare_sps": bare, "ratio": remote / bare, "target": 0.85}
        print(f"(1) CartPole-v1   RemoteEnv {remote:8.0f} steps/s  bare {bare:8.0f} steps/s  "
              f"ratio {remote / bare:.3f}  (target >= 0.85)", flush=True)
    if args.only in (None, "image"):
        remote, bare = alternate(lambda: run_remote(ImageEnv, n, 4), lambda: run_bare(ImageEnv, n, 4, "|u1"), reps)
        report["image84x84x4"] = {"remote_sps": remote, "bare_sps": bare, "ratio": remote / bare, "target": 0.85}
        print(f"(2) 84x84x4 uint8 RemoteEnv {remote:8.0f} steps/s  bare {bare:8.0f} steps/s  "
              f"ratio {remote / bare:.3f}  (target >= 0.85)", flush=True)
    if args.only in (None, "multi"):
        multi, indep = alternate(lambda: run_multi(n // 2), lambda: run_independent(n // 2), reps)
        report["multi4"] = {"multi_body_sps": multi, "independent_body_sps": indep, "ratio": multi / indep,
                            "target": 0.7}
        print(f"(3) 4 bodies      multi judge {multi:8.0f} body-steps/s  4 judges {indep:8.0f} body-steps/s  "
              f"ratio {multi / indep:.3f}  (target >= 0.7)", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
