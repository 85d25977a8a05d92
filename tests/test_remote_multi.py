"""End-to-end tests of the multi-agent judge: barrier, own first observations, timeouts, SIGKILL, close."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import zmq
from gymnasium import spaces
from pettingzoo import ParallelEnv

from slm_lab_like.remote import RemoteEnv, RemoteError, judge_for, serve, shutdown, spawn_judge
from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.spawn import child_environment

pytestmark = pytest.mark.timeout(60)

ENV_ENTRY = "tests.test_remote_multi:MatchingPennies"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class MatchingPennies(ParallelEnv):
    """Deterministic two-player simultaneous matching pennies.

    Observation of each player: [own index, own last action, opponent's last action, seeded noise].
    player_0 scores +1 when the actions match, player_1 when they differ; ``max_cycles`` steps per episode;
    ``quit_at`` makes player_1 terminate early (its last step) so player_0 plays on alone.
    """

    metadata = {"name": "matching_pennies_v0"}

    def __init__(self, max_cycles: int = 10, quit_at: int | None = None) -> None:
        self.possible_agents = ["player_0", "player_1"]
        self.agents: list[str] = []
        self.max_cycles, self.quit_at = max_cycles, quit_at
        self._obs_space = spaces.Box(-1.0, 10.0, (4,), np.float32)
        self._act_space = spaces.Discrete(2)
        self._noise = np.zeros(2, np.float32)
        self._last = {a: -1 for a in self.possible_agents}
        self.t = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_space

    def _obs(self, agent: str) -> np.ndarray:
        i = self.possible_agents.index(agent)
        other = self.possible_agents[1 - i]
        return np.array([i, self._last[agent], self._last[other], self._noise[i]], dtype=np.float32)

    def reset(self, seed: int | None = None, options: dict | None = None):
        self.agents = list(self.possible_agents)
        self._noise = np.random.default_rng(seed).random(2).astype(np.float32)
        self._last = {a: -1 for a in self.possible_agents}
        self.t = 0
        return {a: self._obs(a) for a in self.agents}, {a: {"t": 0} for a in self.agents}

    def step(self, actions: dict):
        self.t += 1
        for a, act in actions.items():
            self._last[a] = int(act)
        match = self._last["player_0"] == self._last["player_1"]
        rewards = {"player_0": 1.0 if match else -1.0, "player_1": -1.0 if match else 1.0}
        rewards = {a: rewards[a] for a in self.agents}
        trunc = {a: self.t >= self.max_cycles for a in self.agents}
        term = {a: a == "player_1" and self.quit_at is not None and self.t >= self.quit_at for a in self.agents}
        obs = {a: self._obs(a) for a in self.agents}
        infos = {a: {"t": self.t} for a in self.agents}
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rewards, term, trunc, infos


def local_run(seed: int, policies: dict, max_cycles: int = 10, quit_at: int | None = None) -> dict:
    """Play the env in-process; ``policies[agent](t)`` gives actions. Returns each player's obs and rewards."""
    env = MatchingPennies(max_cycles, quit_at)
    obs, _ = env.reset(seed=seed)
    out = {a: {"obs": [obs[a].tolist()], "rewards": []} for a in env.possible_agents}
    t = 0
    while env.agents:
        acting = list(env.agents)
        obs, rew, _, _, _ = env.step({a: policies[a](t) for a in acting})
        for a in acting:
            out[a]["obs"].append(obs[a].tolist())
            out[a]["rewards"].append(rew[a])
        t += 1
    return out


PLAYER = r"""
import json, sys, time
from slm_lab_like.remote import RemoteEnv
address, token, policy, stall_after, seed, episodes = sys.argv[1:7]
env = RemoteEnv(address, token=None if token == "-" else token, timeout=20)
for ep in range(int(episodes)):
    t0 = time.monotonic()
    obs, info = env.reset(seed=None if seed == "none" else int(seed))
    traj = {"event": "result", "body": env.body, "obs": [obs.tolist()], "rewards": [], "walls": [],
            "reset_wall": time.monotonic() - t0}
    t = 0
    while True:
        if t == int(stall_after):
            print(json.dumps({"event": "stalled", "t": t}), flush=True)
            time.sleep(3600)
        a = t % 2 if policy == "alternate" else 1
        t0 = time.monotonic()
        obs, r, te, tr, info = env.step(a)
        traj["walls"].append(time.monotonic() - t0)
        traj["obs"].append(obs.tolist())
        traj["rewards"].append(r)
        t += 1
        if te or tr:
            break
    print(json.dumps(traj), flush=True)
env.close()
"""

ALTERNATE = lambda t: t % 2  # noqa: E731
ONES = lambda t: 1  # noqa: E731
NULL = lambda t: 0  # noqa: E731


def start_player(address: str, token: str, policy: str, stall_after: int = -1, seed: str = "11",
                 episodes: int = 1) -> subprocess.Popen:
    """Start one player in its own process."""
    return subprocess.Popen([sys.executable, "-c", PLAYER, address, token, policy, str(stall_after), seed,
                             str(episodes)], stdout=subprocess.PIPE, text=True, env=child_environment(REPO))


def read_event(proc: subprocess.Popen, timeout: float = 30.0) -> dict:
    """Read the player's next JSON line (the fixture timeouts stop a silent player)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.strip():
            return json.loads(line)
        if proc.poll() is not None:
            raise AssertionError(f"player exited with {proc.returncode}")
    raise AssertionError("player silent")


def spawn_multi(procs: list, *args: str, env: str = ENV_ENTRY, kwargs: dict | None = None):
    """Spawn a multi-agent judge subprocess hosting matching pennies."""
    proc, address = spawn_judge(env, multi=True, env_kwargs=kwargs, extra_args=list(args), cwd=REPO)
    procs.append(proc)
    return proc, address, proc.judge_info["tokens"]


def test_two_players_in_their_own_processes(procs):
    """Each player process gets its own first observation and rewards; the run equals the local run."""
    _, address, tokens = spawn_multi(procs)
    assert set(tokens) == {"player_0", "player_1"} and tokens["player_0"] != tokens["player_1"]
    p0 = start_player(address, tokens["player_0"], "alternate")
    p1 = start_player(address, tokens["player_1"], "ones")
    procs += [p0, p1]
    r0, r1 = read_event(p0), read_event(p1)
    expected = local_run(11, {"player_0": ALTERNATE, "player_1": ONES})
    assert (r0["body"], r1["body"]) == ("player_0", "player_1")
    assert r0["obs"][0][0] == 0.0 and r1["obs"][0][0] == 1.0
    for name, got in (("player_0", r0), ("player_1", r1)):
        assert np.allclose(got["obs"], expected[name]["obs"]) and got["rewards"] == expected[name]["rewards"]
    assert sum(r0["rewards"]) == -sum(r1["rewards"])
    assert p0.wait(20) == 0 and p1.wait(20) == 0


def test_sigkilled_player_gets_null_action_and_the_other_finishes(procs):
    """Player 1 is SIGKILLed mid-episode; after one client timeout player 0 finishes with null actions for it."""
    _, address, tokens = spawn_multi(procs, "--client-timeout", "1.0")
    p0 = start_player(address, tokens["player_0"], "alternate")
    p1 = start_player(address, tokens["player_1"], "ones", stall_after=3)
    procs += [p0, p1]
    assert read_event(p1)["event"] == "stalled"
    os.kill(p1.pid, signal.SIGKILL)
    start = time.monotonic()
    r0 = read_event(p0, timeout=15)
    assert time.monotonic() - start < 8
    assert len(r0["rewards"]) == 10
    expected = local_run(11, {"player_0": ALTERNATE, "player_1": lambda t: 1 if t < 3 else 0})
    assert np.allclose(r0["obs"], expected["player_0"]["obs"])
    assert r0["rewards"] == expected["player_0"]["rewards"]
    assert max(r0["walls"]) < 5.0 and sorted(r0["walls"])[-2] < 0.9
    assert p0.wait(20) == 0


def test_a_dead_player_costs_the_others_one_timeout_once(procs):
    """Player 1 is SIGKILLed in its first game; player 0 plays on: one game waits one client timeout for it, and every
    later game starts and plays without waiting (its seat plays its null action) until a client comes back for it."""
    _, address, tokens = spawn_multi(procs, "--client-timeout", "1.0")
    p0 = start_player(address, tokens["player_0"], "alternate", episodes=5)
    p1 = start_player(address, tokens["player_1"], "ones", stall_after=3)
    procs += [p0, p1]
    assert read_event(p1)["event"] == "stalled"
    os.kill(p1.pid, signal.SIGKILL)
    games = [read_event(p0, timeout=15) for _ in range(5)]
    waited = [i for i, g in enumerate(games) if max(g["walls"]) >= 0.9]
    assert len(waited) == 1, [(g["reset_wall"], max(g["walls"])) for g in games]
    later = games[waited[0] + 1:]
    assert later and all(len(g["rewards"]) == 10 for g in later)
    assert all(g["reset_wall"] < 0.5 and max(g["walls"]) < 0.5 for g in later), [g["reset_wall"] for g in later]
    assert p0.wait(20) == 0


def test_finished_body_is_not_waited_for(procs):
    """When player 1's episode ends early, player 0 plays on alone without any timeout wait."""
    _, address, tokens = spawn_multi(procs, "--client-timeout", "20", kwargs={"quit_at": 3})
    p0 = start_player(address, tokens["player_0"], "alternate")
    p1 = start_player(address, tokens["player_1"], "ones", episodes=1)
    procs += [p0, p1]
    r1, r0 = read_event(p1), read_event(p0, timeout=15)
    assert len(r1["rewards"]) == 3 and len(r0["rewards"]) == 10
    expected = local_run(11, {"player_0": ALTERNATE, "player_1": ONES}, quit_at=3)
    assert r0["rewards"] == expected["player_0"]["rewards"] and r1["rewards"] == expected["player_1"]["rewards"]
    assert max(r0["walls"]) < 5.0


@pytest.fixture
def multi_raw():
    """An in-process multi-agent judge that lets clients claim free bodies, plus a factory of bare DEALER protocol
    clients."""
    address = serve(MatchingPennies, multi=True, client_timeout=5.0, allow_claim=True)
    socks: list[zmq.Socket] = []

    def client():
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVTIMEO, 5000)
        sock.connect(address)
        socks.append(sock)
        return sock

    try:
        yield address, client
    finally:
        for s in socks:
            s.close(0)
        shutdown(address)


def call(sock: zmq.Socket, header: dict) -> dict:
    sock.send_multipart(P.encode(header))
    return P.decode(sock.recv_multipart())


def test_duplicate_step_and_step_before_reset(multi_raw):
    """A second step while the first waits at the barrier, or a step before reset, gets an error and changes nothing."""
    address, client = multi_raw
    a, b = client(), client()
    ka = call(a, {"t": "hello", "v": P.PROTOCOL_VERSION, "s": 0})["k"]
    kb = call(b, {"t": "hello", "v": P.PROTOCOL_VERSION, "s": 0})["k"]
    assert call(a, {"t": "step", "k": ka, "s": 1, "a": 0})["code"] == "step_before_reset"
    assert call(a, {"t": "reset", "k": ka, "s": 2, "seed": 3})["t"] == "reset"
    assert call(b, {"t": "reset", "k": kb, "s": 1})["t"] == "reset"
    a.send_multipart(P.encode({"t": "step", "k": ka, "s": 3, "a": 1}))
    dup = call(a, {"t": "step", "k": ka, "s": 4, "a": 0})
    assert (dup["code"], dup["s"]) == ("duplicate_step", 4)
    assert call(a, {"t": "step", "k": kb, "s": 5, "a": 7})["code"] == "invalid_action"
    rb = call(b, {"t": "step", "k": kb, "s": 2, "a": 1})
    ra = P.decode(a.recv_multipart())
    assert (ra["s"], ra["r"], rb["r"]) == (3, 1.0, -1.0)
    assert ra["o"][1] == 1.0 and judge_for(address).env.t == 1


def test_close_ends_episode_cleanly_and_unknown_token_refused(multi_raw):
    """A closing player is no longer waited for; the other finishes; unknown tokens are refused."""
    address, client = multi_raw
    a, b = client(), client()
    ka = call(a, {"t": "hello", "v": P.PROTOCOL_VERSION, "s": 0})["k"]
    kb = call(b, {"t": "hello", "v": P.PROTOCOL_VERSION, "s": 0})["k"]
    assert call(b, {"t": "step", "k": "f" * 32, "s": 1, "a": 0})["code"] == "unknown_token"
    assert call(a, {"t": "hello", "v": P.PROTOCOL_VERSION, "s": 1})["code"] == "full"
    call(a, {"t": "reset", "k": ka, "s": 2, "seed": 1})
    call(b, {"t": "reset", "k": kb, "s": 1})
    assert call(b, {"t": "close", "k": kb, "s": 2})["t"] == "closed"
    start = time.monotonic()
    seq = 3
    while True:
        reply = call(a, {"t": "step", "k": ka, "s": seq, "a": 1})
        seq += 1
        if reply["tr"] or reply["te"]:
            break
    assert time.monotonic() - start < 2.0 and judge_for(address).env.t == 10
    assert judge_for(address).episodes == 1
    judge_for(address).join_timeout = 0.5  # the next game waits this long for the closed player to come back
    start = time.monotonic()
    again = call(a, {"t": "reset", "k": ka, "s": seq, "seed": 1})
    assert again["t"] == "reset" and again["o"][0] == 0.0 and time.monotonic() - start >= 0.45


def test_remote_env_clients_in_threads_with_aec_env():
    """An AEC env is hosted turn by turn (not converted); seeds are forwarded; RemoteEnv claims bodies by name."""
    import threading

    from pettingzoo.utils.conversions import parallel_to_aec

    address = serve(lambda: parallel_to_aec(MatchingPennies()), multi=True, client_timeout=5.0, allow_claim=True)
    results: dict = {}
    try:
        envs = {name: RemoteEnv(address, body=name, timeout=10) for name in ("player_1", "player_0")}
        assert {e.body for e in envs.values()} == {"player_0", "player_1"}
        with pytest.raises(RemoteError):
            RemoteEnv(address, timeout=5)

        def play(name: str) -> None:
            env = envs[name]
            obs, _ = env.reset(seed=5)
            rewards = []
            for t in range(10):
                obs, r, te, tr, _ = env.step(ALTERNATE(t) if name == "player_0" else 1)
                rewards.append(r)
            results[name] = (obs.tolist(), rewards, te or tr)

        threads = [threading.Thread(target=play, args=(n,)) for n in envs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        expected = local_run(5, {"player_0": ALTERNATE, "player_1": ONES})
        for name in envs:
            assert results[name][1] == expected[name]["rewards"] and results[name][2]
            assert np.allclose(results[name][0], expected[name]["obs"][-1])
        for env in envs.values():
            env.close()
    finally:
        shutdown(address)
