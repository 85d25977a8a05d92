"""The multi-agent judge's one barrier, driven in this process by lane connections (socket pairs, no threads): every
reply it gives a client decodes, for any order of requests (fresh, duplicate, retried and invalid steps, binary and
msgpack ones, resets, timeouts, bodies leaving the game) and however an env tells its ends; in games played as
gymnasium loops play them, each client hears exactly what the env itself gives its agent, and a round waits for its
last step."""

from __future__ import annotations

import select
import socket
import struct
from typing import Any

import numpy as np
from gymnasium import spaces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pettingzoo import ParallelEnv

from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.lane import LaneConn, unpack
from slm_lab_like.remote.multi_server import MultiJudgeServer

N = 3
_LEN = struct.Struct("<I")


class Scramble(ParallelEnv):
    """Three players: reward ``action - 1``; a player whose actions sum to 3 or more terminates; 8 steps; an info
    every third step (its reply travels as msgpack, not binary). ``ends`` says how an env tells an end: as PettingZoo
    asks (``"flag"``: flagged and gone from ``agents``), or as some envs do (``"listed"``: flagged but still listed;
    ``"silent"``: gone from ``agents`` without a flag)."""

    metadata = {"name": "scramble_v0"}

    def __init__(self, ends: str = "flag") -> None:
        self.ends = ends
        self.possible_agents = [f"p{i}" for i in range(N)]
        self.agents: list[str] = []
        self._sums = dict.fromkeys(self.possible_agents, 0)
        self.t = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(-100.0, 100.0, (2,), np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(3)

    def _obs(self, agent: str) -> np.ndarray:
        return np.array([self._sums[agent], self.t], np.float32)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.agents, self.t = list(self.possible_agents), int(seed or 0) % 3
        self._sums = dict.fromkeys(self.possible_agents, 0)
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        self.t += 1
        for a, act in actions.items():
            self._sums[a] += int(act)
        over = {a: self._sums[a] >= 3 for a in self.agents}
        term = {a: over[a] and self.ends != "silent" for a in self.agents}
        trunc = {a: self.t >= 8 for a in self.agents}
        infos = {a: ({"third": self.t} if self.t % 3 == 0 else {}) for a in self.agents}
        out = ({a: self._obs(a) for a in self.agents}, {a: float(actions.get(a, 1)) - 1.0 for a in self.agents},
               term, trunc, infos)
        self.agents = [a for a in self.agents if not ((over[a] and self.ends != "listed") or trunc[a])]
        return out


class Table:
    """A judge driven in this process through lane connections (socket pairs), one a body: what each client gets."""

    def __init__(self, ends: str = "flag", env: Any = None) -> None:
        self.judge = MultiJudgeServer(env or (lambda: Scramble(ends)), client_timeout=30.0)
        assert self.judge._lane is not None
        self.judge._lane.attach(select.poll())
        self.names = [b.name for b in self.judge._body_list]
        self.obs_codecs = [P.make_fixed_codec(b.obs_space) for b in self.judge._body_list]
        self.conns: list[LaneConn] = []
        self.peers: list[socket.socket] = []
        self.tokens = list(self.judge.tokens.values())
        self.seqs = [0] * len(self.tokens)
        for token in self.tokens:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            ours.setblocking(False)
            theirs.setblocking(False)
            conn = LaneConn(ours)
            self.judge._lane.conns[conn.fd] = conn
            self.conns.append(conn)
            self.peers.append(theirs)
            self.judge._serve_frames(conn, P.encode({"t": "hello", "v": P.PROTOCOL_VERSION, "k": token, "s": 0}))
            self.heard(len(self.peers) - 1)  # the welcome

    def heard(self, i: int) -> bytes:
        data = b""
        while True:
            try:
                data += self.peers[i].recv(65536)
            except BlockingIOError:
                return data

    def replies(self, i: int, data: bytes | None = None) -> list[dict]:
        """What client ``i`` got (``data``, or what waits on its socket), each reply decoded as its client reads it:
        a msgpack header, or a binary reply as a header of the same fields."""
        data = self.heard(i) if data is None else data
        out, at = [], 0
        while at < len(data):
            (size,) = _LEN.unpack_from(data, at)
            frames, at = unpack(data[at + 4:at + 4 + size]), at + 4 + size
            if frames[0][:1] != b"\xc1":
                out.append(P.decode(frames))
                continue
            tag, flags, seq, reward = P.BIN_REP.unpack_from(frames[0])
            raw = frames[-1] if flags & P.FLAG_OBS_FRAME else frames[0][P.BIN_REP.size:]
            codec = self.obs_codecs[i]
            assert codec is not None and len(raw) == codec.nbytes
            out.append({"t": "step" if tag == P.BIN_STEP_REPLY else "reset", "s": seq, "o": codec.unpack(raw, 0),
                        "r": reward, "te": bool(flags & P.FLAG_TERMINATED), "tr": bool(flags & P.FLAG_TRUNCATED),
                        "i": {}})
        return out

    def send(self, i: int, kind: str, value: int) -> bytes:
        """Send body ``i``'s request and return what its client got back."""
        token = bytes.fromhex(self.tokens[i])
        seq = self.seqs[i] + (kind not in ("duplicate", "retry"))
        self.seqs[i] = max(self.seqs[i], seq)
        if kind in ("step", "duplicate", "retry"):
            flags = P.FLAG_RETRY if kind == "retry" else 0
            frames = [P.BIN_REQ.pack(P.BIN_STEP, flags, seq, token) + P.BIN_SEED.pack(value)]
        elif kind == "msgpack_step":
            frames = P.encode({"t": "step", "k": self.tokens[i], "s": seq, "a": value})
        else:
            frames = [P.BIN_REQ.pack(P.BIN_RESET, P.FLAG_SEED, seq, token) + P.BIN_SEED.pack(value)]
        self.judge._serve_frames(self.conns[i], frames)
        return self.heard(i)


request = st.tuples(st.integers(0, N - 1), st.sampled_from(["step"] * 3 + ["duplicate", "retry", "msgpack_step",
                                                                           "reset", "tick"]), st.integers(0, 3))
# a round: every body steps once (valid actions), in a drawn order: what a game in progress is made of
a_round = st.permutations(range(N)).flatmap(
    lambda order: st.tuples(*[st.tuples(st.just(i), st.just("step"), st.integers(0, 2)) for i in order]))
requests = st.lists(a_round | request.map(lambda r: (r,)), min_size=1, max_size=30).map(
    lambda groups: [r for group in groups for r in group])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests, st.sampled_from(["flag", "listed", "silent"]))
def test_any_order_of_requests_gets_replies_its_clients_read(requests: list[tuple[int, str, int]], ends: str) -> None:
    """Every reply decodes and answers a request its client made (a sequence number it sent, or none for an error
    the judge could not tie to one); none is an internal error; a pending request is newer than the last answered."""
    table = Table(ends=ends)
    for i in range(N):
        table.send(i, "reset", 5)
    got = [table.replies(i) for i in range(N)]
    for i, kind, value in requests:
        if kind == "tick":  # every thinking body times out
            since = table.judge._wait_since
            table.judge._tick(since + 1000.0 if since is not None else 0.0)
            for j in range(N):
                got[j] += table.replies(j)
        else:
            got[i] += table.replies(i, table.send(i, kind, value))
        for j, body in enumerate(table.judge._body_list):
            assert body.pending is None or body.pending.req.seq > body.last_seq
            assert all(r["t"] != "error" or r["code"] != "internal" for r in got[j]), got[j]
            assert all(r["s"] is None or 1 <= r["s"] <= table.seqs[j] for r in got[j]), got[j]


def reset_all(table: Table, env: Any, seed: int) -> None:
    """Every client resets (in a drawn order); each hears the env's own first observation of its agent."""
    want, _ = env.reset(seed=seed)
    got = {i: table.send(i, "reset", seed) for i in np.random.default_rng(seed).permutation(len(table.names)).tolist()}
    for i, name in enumerate(table.names):
        (reply,) = table.replies(i, got[i] + table.heard(i))
        assert reply["t"] == "reset"
        np.testing.assert_array_equal(reply["o"], want[name])


def play_as_gymnasium_loops(table: Table, env: Any, rounds: list[list[int]], seed: int) -> None:
    """The clients step while the env lists their agents, and all reset (``seed``) once it lists none; the env
    itself, stepped with the same actions, says what each client hears. ``rounds``: each round's actions, by body."""
    reset_all(table, env, seed)
    for r, actions in enumerate(rounds):
        movers = [i for i, name in enumerate(table.names) if name in env.agents]
        obs, rewards, terminated, truncated, infos = env.step({table.names[i]: actions[i] for i in movers})
        order = np.random.default_rng([seed, r]).permutation(movers).tolist()
        early = [table.replies(i, table.send(i, "step", actions[i])) for i in order]
        assert all(e == [] for e in early[:-1])  # the barrier held the first ones until the last came
        heard = {order[-1]: early[-1]} | {i: table.replies(i) for i in order[:-1]}
        for i in movers:
            name = table.names[i]
            (reply,) = heard[i]
            assert reply["t"] == "step"
            np.testing.assert_array_equal(reply["o"], obs[name])
            assert (reply["r"], reply["te"], reply["tr"]) == (rewards[name], terminated[name], truncated[name])
            assert reply["i"] == infos[name]
        if not env.agents:
            reset_all(table, env, seed)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.integers(0, 2), min_size=N, max_size=N), min_size=1, max_size=40), st.integers(0, 9))
def test_each_client_hears_what_the_env_gives_its_agent(rounds: list[list[int]], seed: int) -> None:
    play_as_gymnasium_loops(Table(), Scramble(), rounds, seed)


def test_a_pettingzoo_game_is_heard_as_the_env_plays_it() -> None:
    """PettingZoo's own rock-paper-scissors (from its package), 60 rounds over three episodes of 20."""
    from pettingzoo.classic import rps_v2

    table = Table(env=lambda: rps_v2.parallel_env(max_cycles=20))
    rounds = np.random.default_rng(0).integers(0, 3, (60, 2)).tolist()
    play_as_gymnasium_loops(table, rps_v2.parallel_env(max_cycles=20), rounds, 3)
    assert table.judge.episodes == 3
