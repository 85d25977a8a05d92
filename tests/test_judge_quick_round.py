"""The multi-agent judge's quick way through a parallel game's steady state (``_quick_step``, ``_quick_round``) gives
every client the same bytes and leaves the judge in the same state as its general way, for any order of requests:
fresh, duplicate, retried and invalid steps, binary and msgpack ones, resets, timeouts, bodies leaving the game."""

from __future__ import annotations

import select
import socket
from typing import Any

import numpy as np
from gymnasium import spaces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pettingzoo import ParallelEnv

from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.lane import LaneConn
from slm_lab_like.remote.multi_server import MultiJudgeServer

N = 3


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

    def __init__(self, quick: bool, ends: str = "flag", env: Any = None) -> None:
        self.judge = MultiJudgeServer(env or (lambda: Scramble(ends)), client_timeout=30.0)
        self.judge._parallel = self.judge._parallel and quick  # the quick way is taken only for parallel games
        assert self.judge._lane is not None
        self.judge._lane.attach(select.poll())
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
            self.heard(len(self.peers) - 1)  # the welcome names this judge's lane and tokens: not compared

    def heard(self, i: int) -> bytes:
        data = b""
        while True:
            try:
                data += self.peers[i].recv(65536)
            except BlockingIOError:
                return data

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

    def state(self) -> list[Any]:
        """What the judge knows of the game and of each body (times left out: they differ between the tables)."""
        judge = self.judge
        bodies = [(b.last_seq, b.last_reply is not None, b.done, b.joined, b.absent, b.timed_out, b.turn, b.playing,
                   b.ep_return, b.reward, b.final is not None, None if b.pending is None else
                   (b.pending.kind, b.pending.req.seq, b.pending.acted, b.pending.joining)) for b in judge._body_list]
        return [judge.episodes, judge.episode_running, judge._ep_length, judge._wait_since is None, bodies]


request = st.tuples(st.integers(0, N - 1), st.sampled_from(["step"] * 3 + ["duplicate", "retry", "msgpack_step",
                                                                           "reset", "tick"]), st.integers(0, 3))
# a round: every body steps once (valid actions), in a drawn order: what a game in progress is made of
a_round = st.permutations(range(N)).flatmap(
    lambda order: st.tuples(*[st.tuples(st.just(i), st.just("step"), st.integers(0, 2)) for i in order]))
requests = st.lists(a_round | request.map(lambda r: (r,)), min_size=1, max_size=30).map(
    lambda groups: [r for group in groups for r in group])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests, st.sampled_from(["flag", "listed", "silent"]))
def test_quick_way_is_the_general_way(requests: list[tuple[int, str, int]], ends: str) -> None:
    quick, general = Table(quick=True, ends=ends), Table(quick=False, ends=ends)
    for table in (quick, general):
        for i in range(N):
            table.send(i, "reset", 5)
    for i, kind, value in requests:
        if kind == "tick":  # every thinking body times out, in both tables alike
            for table in (quick, general):
                table.judge._tick(table.judge._wait_since + 1000.0 if table.judge._wait_since is not None else 0.0)
            got = [[t.heard(j) for j in range(N)] for t in (quick, general)]
            assert got[0] == got[1]
        else:
            assert quick.send(i, kind, value) == general.send(i, kind, value), (i, kind, value)
        assert quick.state() == general.state(), (i, kind, value)


def test_a_game_in_progress_takes_the_quick_way() -> None:
    """The steady state is what the quick way serves: a round of fresh binary steps is played by _quick_round."""
    table = Table(quick=True)
    for i in range(N):
        table.send(i, "reset", 0)
    rounds = []
    original = table.judge._quick_round
    table.judge._quick_round = lambda actions, now: (rounds.append(dict(actions)), original(actions, now))[1]
    early = [table.send(i, "step", 1) for i in range(N)]
    assert rounds == [{f"p{i}": 1 for i in range(N)}]
    assert early[:-1] == [b""] * (N - 1)  # the barrier held the first ones until the last came
    replies = [early[-1]] + [table.heard(i) for i in range(N - 1)]
    assert all(r[10:12] == P.BIN_STEP_REPLY for r in replies)  # each got its binary step reply


def test_a_pettingzoo_game_plays_alike_both_ways() -> None:
    """PettingZoo's own rock-paper-scissors (from its package), 3 episodes of 25 random rounds (each ends at 20):
    the same bytes to each client and the same judge state both ways."""
    from pettingzoo.classic import rps_v2

    rng = np.random.default_rng(0)
    quick, general = (Table(quick=q, env=lambda: rps_v2.parallel_env(max_cycles=20)) for q in (True, False))
    for episode in range(3):
        for i in rng.permutation(2).tolist():
            assert quick.send(i, "reset", episode) == general.send(i, "reset", episode)
        for _ in range(25):
            actions = rng.integers(0, 3, 2).tolist()
            for i in rng.permutation(2).tolist():
                assert quick.send(i, "step", actions[i]) == general.send(i, "step", actions[i])
            assert [quick.heard(i) for i in range(2)] == [general.heard(i) for i in range(2)]
            assert quick.state() == general.state()
    assert quick.judge.episodes == general.judge.episodes == 3
