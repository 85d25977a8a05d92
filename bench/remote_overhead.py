"""Benchmark the remote-env protocol overhead against a bare pyzmq loop (same sockets, same env, same actions).

Prints three ratios (targets in brackets):
  1. RemoteEnv steps/s on CartPole-v1 / bare ROUTER-DEALER loop replying raw bytes        [>= 0.85]
  2. the same with 84x84x4 uint8 observations                                           [>= 0.9]
  3. multi-agent judge with 4 client processes, aggregate body-steps/s
     / 4 independent single-agent judges each with its own client process                 [>= 0.9]
     Also printed: CPU per body-step of the judges and clients (4 singles / the multi judge: what the multi path
     costs, apart from the barrier's serial turnaround), the same by the lane (both variants), and the ceiling of
     any barrier on ZeroMQ: a bare pyzmq server answering 4 bare clients once all 4 asked / 4 bare pyzmq servers
     with one client each.
  4. Stable-Baselines3 A2C on 4 CartPole-v1 copies: frames/s through one vector client (RemoteVecEnv, one
     round trip per step, by the judge's same-host lane) / the same run on local envs (DummyVecEnv)  [>= 0.8]
     Also printed, each / local: the vector client with spinning on both ends (judge --spin 0.002, client
     spin=0.001: a core's time for latency), on ZeroMQ alone (lane=False), 4 RemoteEnvs in a DummyVecEnv (one
     round trip per env per step) by the lane and on ZeroMQ alone (the latter is the client before issue 14).
     The runs are the same run: same seeds, same trajectories, the same trained parameters (checked).
Sections 1-3 measure the ZeroMQ protocol (clients with lane=False), as they always did.
Each measurement runs server and client in separate processes (fresh ones per run). The two variants of a
comparison alternate (ABBA order, so neither always runs first) ``--repeats`` times each.

The headline ratio is an honest throughput ratio: median steps/s of one variant / median steps/s of the other.
On a busy machine throughput is noisy, so each line also prints
  paired: the median over the alternating pairs of (steps/s ratio within the pair), less sensitive to slow
          drifts of the machine's load;
  cpu:    bare CPU per step / RemoteEnv CPU per step, client process + server process, every thread
          (client: time.process_time; server: /proc/PID/task/*/schedstat read by the client around its
          timed loop), which tells the protocol's own cost apart from waiting for a busy CPU
          (single-agent comparisons only; Linux only, otherwise nan).
Usage: python bench/remote_overhead.py [--steps 10000] [--repeats 9] [--only cartpole|image|multi|sb3]
       [--sb3-steps 20000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import statistics
import struct
import time
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import zmq
from gymnasium import spaces

from slm_lab_like.remote import JudgeServer, MultiJudgeServer, RemoteEnv, spawn_judge, stop_judge
from slm_lab_like.remote.vector_client import RemoteVecEnv

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
    q.put((judge.address, judge.tokens) if multi else judge.address)  # a multi-agent judge admits its tokens only
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
def _cpu_of(pid: int | None) -> float:
    """CPU seconds used so far by every thread of process ``pid`` (Linux /proc schedstat; nan elsewhere)."""
    if pid is None:
        return math.nan
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return math.nan
    return total / 1e9


def _remote_client(address: str, n: int, k: int, q: Any, barrier: Any = None,
                   server_pid: int | None = None, token: str | None = None, lane: bool = False) -> None:
    env = RemoteEnv(address, token=token, timeout=60, lane=lane)
    actions = _actions(n, k)
    if barrier is not None:
        barrier.wait()
    s0, c0, t0 = _cpu_of(server_pid), time.process_time(), time.perf_counter()
    env.reset(seed=SEED)
    for a in actions:
        _, _, te, tr, _ = env.step(a)
        if te or tr:
            env.reset()
    t1, c1, s1 = time.perf_counter(), time.process_time(), _cpu_of(server_pid)
    q.put((n, t1 - t0, c1 - c0, s1 - s0))
    env.close()


def _bare_client(address: str, n: int, k: int, obs_dtype: str, q: Any, server_pid: int | None = None) -> None:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.connect(address)
    actions = _actions(n, k)
    unpack = struct.Struct("<d??").unpack_from
    dtype = np.dtype(obs_dtype)
    s0, c0, t0 = _cpu_of(server_pid), time.process_time(), time.perf_counter()
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
    t1, c1, s1 = time.perf_counter(), time.process_time(), _cpu_of(server_pid)
    q.put((n, t1 - t0, c1 - c0, s1 - s0))
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


def run_remote(factory: Callable, n: int, k: int) -> tuple[float, float]:
    """Steps/s and CPU seconds per step (both processes) of one RemoteEnv client against one judge process."""
    q = CTX.Queue()
    server = _start(_judge_proc, factory, q, False)
    address = q.get(timeout=60)
    client = _start(_remote_client, address, n, k, q, None, server.pid)
    steps, secs, client_cpu, server_cpu = q.get(timeout=600)
    _stop([client])
    server.kill()
    _stop([server])
    return steps / secs, (client_cpu + server_cpu) / steps


def run_bare(factory: Callable, n: int, k: int, obs_dtype: str) -> tuple[float, float]:
    """Steps/s and CPU s/step of the bare pyzmq ROUTER/DEALER loop (server steps the env, replies raw bytes)."""
    q = CTX.Queue()
    server = _start(_bare_server_proc, factory, q)
    address = q.get(timeout=60)
    client = _start(_bare_client, address, n, k, obs_dtype, q, server.pid)
    steps, secs, client_cpu, server_cpu = q.get(timeout=600)
    _stop([client, server])
    return steps / secs, (client_cpu + server_cpu) / steps


def _bare_barrier_proc(q: Any, bodies: int) -> None:
    """A bare pyzmq barrier: read one request from each of ``bodies`` clients, then answer each (4 floats and flags)."""
    sock = zmq.Context.instance().socket(zmq.ROUTER)
    sock.bind("tcp://127.0.0.1:0")
    q.put(sock.getsockopt_string(zmq.LAST_ENDPOINT))
    reply = bytes(16 + 10)
    while True:
        idents = [sock.recv_multipart()[0] for _ in range(bodies)]
        for ident in idents:
            sock.send_multipart([ident, reply])


def _bare_step_client(address: str, n: int, q: Any, barrier: Any) -> None:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.connect(address)
    barrier.wait()
    t0 = time.perf_counter()
    for a in _actions(n, 2):
        sock.send(b"s" + bytes([a]))
        sock.recv()
    q.put((n, time.perf_counter() - t0))


def run_bare_barrier(n: int, bodies: int = 4, shared: bool = True) -> float:
    """Aggregate steps/s of ``bodies`` bare pyzmq clients of one bare barrier server (``shared``) or each of its own
    bare server: what ZeroMQ allows any barrier, without a judge's work."""
    q = CTX.Queue()
    barrier = CTX.Barrier(bodies)
    servers = [_start(_bare_barrier_proc, q, bodies if shared else 1) for _ in range(1 if shared else bodies)]
    addresses = [q.get(timeout=60) for _ in servers]
    clients = [_start(_bare_step_client, addresses[0 if shared else i], n, q, barrier) for i in range(bodies)]
    results = [q.get(timeout=600) for _ in clients]
    _stop(clients)
    for s in servers:
        s.kill()
    _stop(servers)
    return sum(r[0] for r in results) / max(r[1] for r in results)


def _with_cpu(results: list, servers: list[float]) -> tuple[float, float]:
    """Aggregate body-steps/s of client results, and CPU seconds per body-step of the clients and the judges."""
    steps = sum(r[0] for r in results)
    return steps / max(r[1] for r in results), (sum(r[2] for r in results) + sum(servers)) / steps


def run_multi(n: int, bodies: int = 4, lane: bool = False) -> tuple[float, float]:
    """Aggregate body-steps/s of one multi-agent judge with ``bodies`` client processes (by the lane or not), and
    the CPU per body-step of the judge and its clients."""
    q = CTX.Queue()
    barrier = CTX.Barrier(bodies)
    server = _start(_judge_proc, lambda: WalkersParallel(bodies), q, True)
    address, tokens = q.get(timeout=60)
    s0 = _cpu_of(server.pid)
    clients = [_start(_remote_client, address, n, 2, q, barrier, None, token, lane) for token in tokens.values()]
    results = [q.get(timeout=600) for _ in clients]
    s1 = _cpu_of(server.pid)
    _stop(clients)
    server.kill()
    _stop([server])
    return _with_cpu(results, [s1 - s0])


def run_independent(n: int, bodies: int = 4, lane: bool = False) -> tuple[float, float]:
    """Aggregate body-steps/s of ``bodies`` single-agent judges, each with its own client process (by the lane or
    not), and the CPU per body-step of the judges and their clients."""
    q = CTX.Queue()
    barrier = CTX.Barrier(bodies)
    servers = [_start(_judge_proc, WalkerEnv, q, False) for _ in range(bodies)]
    addresses = [q.get(timeout=60) for _ in servers]
    s0 = [_cpu_of(s.pid) for s in servers]
    clients = [_start(_remote_client, addr, n, 2, q, barrier, None, None, lane) for addr in addresses]
    results = [q.get(timeout=600) for _ in clients]
    s1 = [_cpu_of(s.pid) for s in servers]
    _stop(clients)
    for s in servers:
        s.kill()
    _stop(servers)
    return _with_cpu(results, [b - a for a, b in zip(s0, s1)])


def alternate(a: Callable[[], Any], b: Callable[[], Any], repeats: int) -> dict[str, Any]:
    """Run ``a`` and ``b`` alternately (ABBA order) ``repeats`` times each and summarise both.

    Each call returns steps/s or (steps/s, CPU s/step). The result holds both medians, the throughput
    ratio of the medians (the headline), the median of the per-pair throughput ratios, and the CPU ratio
    (median CPU per step of ``b`` / that of ``a``; nan without CPU figures).
    """
    ra: list[tuple[float, float]] = []
    rb: list[tuple[float, float]] = []
    as_pair = lambda x: x if isinstance(x, tuple) else (x, math.nan)  # noqa: E731
    for i in range(repeats):
        if i % 2 == 0:
            ra.append(as_pair(a()))
            rb.append(as_pair(b()))
        else:
            rb.append(as_pair(b()))
            ra.append(as_pair(a()))
    med_a, med_b = statistics.median(x for x, _ in ra), statistics.median(x for x, _ in rb)
    cpu_a, cpu_b = statistics.median(c for _, c in ra), statistics.median(c for _, c in rb)
    return {"a": med_a, "b": med_b, "ratio": med_a / med_b,
            "paired_ratio": statistics.median(x / y for (x, _), (y, _) in zip(ra, rb)),
            "cpu_a_us": cpu_a * 1e6, "cpu_b_us": cpu_b * 1e6, "cpu_ratio": cpu_b / cpu_a,
            "runs_a": [x for x, _ in ra], "runs_b": [x for x, _ in rb]}


# ---- Stable-Baselines3 through the vector client ------------------------------------------------
def sb3_vec_env(venv: gym.vector.VectorEnv) -> Any:
    """A gymnasium VectorEnv with SAME_STEP autoreset (RemoteVecEnv) as a Stable-Baselines3 VecEnv."""
    from stable_baselines3.common.vec_env import VecEnv

    class GymVectorAsSB3(VecEnv):
        """SB3's VecEnv API over a gymnasium VectorEnv: seeds and terminal observations as DummyVecEnv gives them."""

        def __init__(self) -> None:
            self.venv = venv
            super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)

        def reset(self) -> np.ndarray:
            seeds = self._seeds
            obs, _ = venv.reset(seed=None if all(x is None for x in seeds) else [None if x is None else int(x)
                                                                               for x in seeds])
            self._reset_seeds()
            self._reset_options()
            return obs

        def step_async(self, actions: np.ndarray) -> None:
            self._actions = actions

        def step_wait(self) -> tuple:
            obs, reward, terminated, truncated, info = venv.step(self._actions)
            dones = terminated | truncated
            infos: list[dict] = [{"TimeLimit.truncated": tr and not te}
                                 for te, tr in zip(terminated.tolist(), truncated.tolist())]
            for i in np.flatnonzero(dones):
                infos[i]["terminal_observation"] = info["final_obs"][i]
            return obs, reward.astype(np.float32), dones, infos

        def close(self) -> None:
            venv.close()

        def get_attr(self, attr_name: str, indices: Any = None) -> list:
            return [getattr(venv, attr_name)] * len(self._get_indices(indices))

        def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
            raise NotImplementedError("the copies live in the judge")

        def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list:
            raise NotImplementedError("the copies live in the judge")

        def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
            return [False] * len(self._get_indices(indices))

    return GymVectorAsSB3()


def sb3_a2c(kind: str, address: str | None, frames: int, n: int = 4) -> tuple[float, float]:
    """Frames/s of SB3 A2C (default hyperparameters, seed 0) learning CartPole-v1 on ``n`` copies: ``local``
    (DummyVecEnv of gym.make), ``vector`` (one RemoteVecEnv) or ``clients`` (DummyVecEnv of RemoteEnvs), the
    remote ones with ``_zmq`` on ZeroMQ alone; and a fingerprint of the trained parameters, equal for equal runs."""
    import torch
    from stable_baselines3 import A2C
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(1)
    if kind == "local":
        venv = DummyVecEnv([lambda: gym.make("CartPole-v1")] * n)
    elif kind.startswith("vector"):
        spin = 0.001 if kind.endswith("_spin") else None  # None: the client's default (adaptive) spin
        venv = sb3_vec_env(RemoteVecEnv(address, n, timeout=60, lane=not kind.endswith("_zmq"), spin=spin))
    else:
        venv = DummyVecEnv([lambda: RemoteEnv(address, timeout=60, lane=not kind.endswith("_zmq"))] * n)
    model = A2C("MlpPolicy", venv, seed=0, device="cpu")
    model.set_logger(Logger(None, []))  # SB3's default logger makes a folder in the temp dir per run
    start = time.perf_counter()
    model.learn(total_timesteps=frames)
    fps = model.num_timesteps / (time.perf_counter() - start)
    with torch.no_grad():
        fingerprint = float(sum(p.double().sum() for p in model.policy.parameters()))
    venv.close()
    return fps, fingerprint


def run_sb3(frames: int, repeats: int) -> dict[str, Any]:
    """SB3 A2C frames/s: vector client vs local (ABBA order), and the other clients, against a judge process (and
    a spinning one)."""
    proc, address = spawn_judge("CartPole-v1")
    spinning, spin_address = spawn_judge("CartPole-v1", spin=0.002)
    prints: set[float] = set()
    try:
        def measure(kind: str) -> float:
            fps, fingerprint = sb3_a2c(kind, spin_address if kind.endswith("_spin") else address, frames)
            prints.add(round(fingerprint, 9))
            return fps
        others: dict[str, list[float]] = {k: [] for k in ("vector_spin", "vector_zmq", "clients", "clients_zmq")}

        def pair_and_others(kind: str) -> float:
            if kind == "local":
                for other in others:
                    others[other].append(measure(other))
            return measure(kind)
        r = alternate(lambda: pair_and_others("vector"), lambda: pair_and_others("local"), repeats)
    finally:
        stop_judge(proc)
        stop_judge(spinning)
    for kind, runs in others.items():
        r[kind], r[f"{kind}_ratio"] = statistics.median(runs), statistics.median(runs) / r["b"]
    r["same_run"] = len(prints) == 1
    return r


def _load() -> str:
    """The machine's load averages and core count, for the record."""
    try:
        return f"load {' '.join(open('/proc/loadavg').read().split()[:3])} on {os.cpu_count()} cores"
    except OSError:
        return f"{os.cpu_count()} cores"


def _detail(r: dict) -> str:
    cpu = "" if math.isnan(r["cpu_ratio"]) else (f"  cpu {r['cpu_ratio']:.3f} ({r['cpu_b_us']:.1f} / "
                                                  f"{r['cpu_a_us']:.1f} us/step)")
    return f"[paired {r['paired_ratio']:.3f}{cpu}]"


def main() -> None:
    """Run the three comparisons and print their ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=9)  # 5 rounds left the image ratio to a noisy machine
    ap.add_argument("--only", choices=("cartpole", "image", "multi", "sb3"), default=None)
    ap.add_argument("--sb3-steps", type=int, default=20_000, help="frames of each SB3 A2C run")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    n, reps = args.steps, args.repeats
    report: dict[str, Any] = {"steps": n, "repeats": reps}
    cartpole = lambda: gym.make("CartPole-v1")  # noqa: E731
    if args.only in (None, "cartpole"):
        r = alternate(lambda: run_remote(cartpole, n, 2), lambda: run_bare(cartpole, n, 2, "<f4"), reps)
        report["cartpole"] = {"remote_sps": r["a"], "bare_sps": r["b"], **r, "target": 0.85}
        print(f"(1) CartPole-v1   RemoteEnv {r['a']:8.0f} steps/s  bare {r['b']:8.0f} steps/s  "
              f"ratio {r['ratio']:.3f}  (target >= 0.85)  {_detail(r)}", flush=True)
    if args.only in (None, "image"):
        r = alternate(lambda: run_remote(ImageEnv, n, 4), lambda: run_bare(ImageEnv, n, 4, "|u1"), reps)
        report["image84x84x4"] = {"remote_sps": r["a"], "bare_sps": r["b"], **r, "target": 0.9}
        print(f"(2) 84x84x4 uint8 RemoteEnv {r['a']:8.0f} steps/s  bare {r['b']:8.0f} steps/s  "
              f"ratio {r['ratio']:.3f}  (target >= 0.9)  {_detail(r)}", flush=True)
    if args.only in (None, "multi"):
        r = alternate(lambda: run_multi(n // 2), lambda: run_independent(n // 2), reps)
        report["multi4"] = {"multi_body_sps": r["a"], "independent_body_sps": r["b"], **r, "target": 0.9}
        by_lane = alternate(lambda: run_multi(n // 2, lane=True), lambda: run_independent(n // 2, lane=True), reps)
        bare = alternate(lambda: run_bare_barrier(n // 2), lambda: run_bare_barrier(n // 2, shared=False), reps)
        report["multi4"].update(lane=by_lane, bare_zmq_barrier=bare)
        print(f"(3) 4 bodies      multi judge {r['a']:8.0f} body-steps/s  4 judges {r['b']:8.0f} body-steps/s  "
              f"ratio {r['ratio']:.3f}  (target >= 0.9)  [paired {r['paired_ratio']:.3f}; cpu per body-step, "
              f"judges and clients: {r['cpu_b_us']:.1f} / {r['cpu_a_us']:.1f} us = {r['cpu_ratio']:.3f}; by the lane: "
              f"{by_lane['a']:.0f} / {by_lane['b']:.0f} = {by_lane['ratio']:.3f}; the same of bare pyzmq "
              f"(any barrier's ceiling on ZeroMQ): {bare['a']:.0f} / {bare['b']:.0f} = {bare['ratio']:.3f}]", flush=True)
    if args.only in (None, "sb3"):
        before = _load()
        r = run_sb3(args.sb3_steps, reps)
        report["sb3_a2c4"] = {"vector_fps": r["a"], "local_fps": r["b"], **r, "target": 0.8}
        print(f"(4) SB3 A2C 4 envs  vector client {r['a']:7.0f} frames/s  local {r['b']:7.0f} frames/s  "
              f"ratio {r['ratio']:.3f}  (target >= 0.8)  [paired {r['paired_ratio']:.3f}; ratios of the others: "
              f"vector spinning {r['vector_spin_ratio']:.3f}, "
              f"vector on ZeroMQ alone {r['vector_zmq_ratio']:.3f}, 4 RemoteEnvs {r['clients_ratio']:.3f}, "
              f"4 RemoteEnvs on ZeroMQ alone {r['clients_zmq_ratio']:.3f}; same run: {r['same_run']}; "
              f"{before} before, {_load()} after]", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
