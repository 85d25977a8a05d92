"""Turn-based hosting: a PettingZoo AEC env behind the multi-agent judge, not converted to a parallel env.

Each client sees a single-agent env whose step returns at its next turn (or its game's end) with PettingZoo's
``last()`` view: its own observation (a Dict with the action mask) and the reward since it last acted, the
opponent's winning move included (a reset carries no reward: any reward before the first turn comes with the
first step's reply). Checked against a local ``agent_iter`` / ``last()`` loop of the same moves.
"""

from __future__ import annotations

import io
import json
import threading
import time
from typing import Any

import numpy as np
import pytest
import zmq
from gymnasium import spaces
from pettingzoo import AECEnv

from slm_lab_like.envs.games.connect_four import ConnectFourEnv
from slm_lab_like.remote import (
    MultiJudgeServer, RemoteEnv, judge_for, serve, serve_spec, shutdown, spawn_judge, stop_judge,
)
from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.play import make_play

pytestmark = pytest.mark.timeout(60)


class RaceGame(AECEnv):
    """Two players alternately add 1 or 2 (actions 1, 2) to a total; who brings it to 5 wins (+1, the other -1).

    Action 0 resigns (the mover -1, the other +1); the mask never offers it, so a silent player's null
    action (0) falls back to 1. Every move of 2 costs its mover 0.25 and pays the opponent 0.25, so rewards
    come from the opponent's moves as well.
    """

    metadata = {"name": "race_v0"}

    def __init__(self) -> None:
        super().__init__()
        self.possible_agents = ["player_0", "player_1"]
        self._obs_space = spaces.Dict({"observation": spaces.Box(0, 10, (2,), np.int64),
                                       "action_mask": spaces.Box(0, 1, (3,), np.int8)})
        self._act_space = spaces.Discrete(3)
        self.total = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_space

    def observe(self, agent: str) -> dict:
        mask = np.array([0, 1, 1] if agent == self.agent_selection else [0, 0, 0], np.int8)
        return {"observation": np.array([self.total, self.possible_agents.index(agent)], np.int64),
                "action_mask": mask}

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self.agent_selection = "player_0"
        self.total = 0

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        other = self.possible_agents[1 - self.possible_agents.index(agent)]
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        if int(action) == 0:
            self.rewards[agent], self.rewards[other] = -1.0, 1.0
            self.terminations = {a: True for a in self.agents}
        else:
            self.total += int(action)
            if int(action) == 2:
                self.rewards[agent], self.rewards[other] = -0.25, 0.25
            if self.total >= 5:
                self.rewards[agent] += 1.0
                self.rewards[other] -= 1.0
                self.terminations = {a: True for a in self.agents}
        self.agent_selection = other
        self._accumulate_rewards()


def local_views(make: Any, moves: dict[str, list[int]]) -> dict[str, list[tuple]]:
    """Each agent's ``last()`` view at each of its selections when the env is played locally with ``moves``."""
    env = make()
    env.reset()
    left = {a: iter(m) for a, m in moves.items()}
    views: dict[str, list[tuple]] = {a: [] for a in env.possible_agents}
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, _ = env.last()
        views[agent].append((obs, float(reward), bool(terminated), bool(truncated)))
        env.step(None if terminated or truncated else next(left[agent]))
    return views


def remote_views(address: str, moves: dict[str, list[int]], tokens: dict[str, str]) -> dict[str, list[tuple]]:
    """Each player's reset and step replies when two RemoteEnv clients (in threads) play ``moves``."""
    views: dict[str, list[tuple]] = {}
    errors: list[BaseException] = []

    def play(name: str) -> None:
        try:
            env = RemoteEnv(address, token=tokens[name], timeout=10)
            obs, _ = env.reset()
            seen = [(obs, 0.0, False, False)]
            for action in moves[name]:
                obs, reward, terminated, truncated, _ = env.step(action)
                seen.append((obs, reward, terminated, truncated))
                if terminated or truncated:
                    break
            views[name] = seen
            env.close()
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=play, args=(name,)) for name in moves]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors, errors
    return views


def same_obs(a: dict, b: dict) -> bool:
    return set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.fixture
def judge():
    """Start a multi-agent judge for a factory in this process; stopped afterwards."""
    started: list[str] = []

    def start(factory: Any, **kwargs: Any) -> tuple[str, MultiJudgeServer]:
        address = serve(factory, multi=True, **kwargs)
        started.append(address)
        return address, judge_for(address)

    yield start
    for address in started:
        shutdown(address)


@pytest.mark.parametrize("make, moves", [
    (ConnectFourEnv, {"player_0": [0, 0, 0, 0], "player_1": [1, 1, 1]}),
    (ConnectFourEnv, {"player_0": [0, 0, 0, 6], "player_1": [1, 2, 3, 4]}),
    (RaceGame, {"player_0": [2, 1, 2], "player_1": [2, 2]}),
])
def test_turns_equal_the_local_last_loop(judge, make, moves):
    """Reset at the first turn, each step at the next turn or the end, with last()'s observation and reward."""
    address, server = judge(make, client_timeout=5.0)
    assert server.api == "aec" and server.env.__class__ is make
    got = remote_views(address, moves, server.tokens)
    want = local_views(make, moves)
    for name in moves:
        assert len(got[name]) == len(want[name])
        for (o, _, te, tr), (wo, _, wte, wtr) in zip(got[name], want[name]):
            assert same_obs(o, wo) and (te, tr) == (wte, wtr)
        rewards = [r for _, r, _, _ in want[name]]
        rewards[1] += rewards[0]  # a reset carries no reward: what came before the first turn comes with the next
        assert [r for _, r, _, _ in got[name]] == [0.0, *rewards[1:]]
    finals = [got[name][-1][1] for name in moves]
    assert sum(finals) == 0 and got["player_0"][-1][2] and got["player_1"][-1][2]
    assert server.episodes == 1


def test_the_winning_move_reaches_the_loser_with_the_other_moves_rewards(judge):
    """player_0's last step returns after player_1's winning move, with everything since its own move: its move
    of 2 cost 0.25, player_1's move of 2 paid it 0.25 and won (-1)."""
    address, server = judge(RaceGame)
    got = remote_views(address, {"player_0": [1, 2], "player_1": [1, 2]}, server.tokens)
    assert [(r, te) for _, r, te, _ in got["player_0"][1:]] == [(0.0, False), (-1.0, True)]
    assert [(r, te) for _, r, te, _ in got["player_1"][1:]] == [(0.25, False), (0.75, True)]


def test_dict_observations_with_the_mask_reach_the_client(judge):
    """The client's observation space is the env's Dict; the mask is set on the client's own turn."""
    address, server = judge(ConnectFourEnv, join_timeout=0.0)
    env = RemoteEnv(address, token=server.tokens["player_0"], timeout=5)
    try:
        assert isinstance(env.observation_space, spaces.Dict)
        assert set(env.observation_space.spaces) == {"observation", "action_mask"}
        obs, _ = env.reset()
        assert obs["action_mask"].tolist() == [1] * 7 and obs in env.observation_space
    finally:
        env.close()


def raw_client(address: str) -> zmq.Socket:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(address)
    return sock


def ask(sock: zmq.Socket, header: dict) -> None:
    sock.send_multipart(P.encode(header))


def answer(sock: zmq.Socket, timeout: float = 5.0) -> dict | None:
    """The next reply, or None when none comes within ``timeout`` seconds."""
    if not sock.poll(int(timeout * 1000)):
        return None
    return P.decode(sock.recv_multipart())


def test_reset_returns_at_the_first_turn_and_step_at_the_next(judge):
    """player_1's reset waits for player_0's move; player_0's step waits for player_1's move."""
    address, server = judge(ConnectFourEnv)
    tokens = server.tokens
    a, b = raw_client(address), raw_client(address)
    try:
        for sock, name in ((a, "player_0"), (b, "player_1")):
            ask(sock, {"t": "hello", "v": P.PROTOCOL_VERSION, "k": tokens[name], "s": 0})
            assert answer(sock)["t"] == "welcome"
        ask(b, {"t": "reset", "k": tokens["player_1"], "s": 1})
        assert answer(b, 0.3) is None
        ask(a, {"t": "reset", "k": tokens["player_0"], "s": 1, "seed": 3})
        assert answer(a)["t"] == "reset"
        ask(a, {"t": "step", "k": tokens["player_0"], "s": 2, "a": 3})
        first = answer(b)
        assert first["t"] == "reset" and first["o"]["action_mask"].tolist() == [1] * 7
        assert first["o"]["observation"][5, 3, 1] == 1  # player_0's piece, seen from player_1's side
        assert answer(a, 0.3) is None
        ask(b, {"t": "step", "k": tokens["player_1"], "s": 2, "a": 3})
        reply = answer(a)
        assert (reply["t"], reply["s"], reply["r"], reply["te"]) == ("step", 2, 0.0, False)
        assert reply["o"]["observation"][4, 3, 1] == 1
    finally:
        a.close(0)
        b.close(0)


def test_a_game_over_before_the_first_turn_is_told_at_the_next_step(judge):
    """player_0 resigns at once: player_1's waiting reset returns, then its step returns the +1 and the end."""
    address, server = judge(RaceGame)
    tokens = server.tokens
    second = raw_client(address)
    try:
        ask(second, {"t": "hello", "v": P.PROTOCOL_VERSION, "k": tokens["player_1"], "s": 0})
        assert answer(second)["t"] == "welcome"
        ask(second, {"t": "reset", "k": tokens["player_1"], "s": 1})
        env = RemoteEnv(address, token=tokens["player_0"], timeout=5)
        env.reset()
        assert env.step(0)[1:3] == (-1.0, True)
        env.close()
        first = answer(second)
        assert first["t"] == "reset" and first["o"]["observation"].tolist() == [0, 1]
        ask(second, {"t": "step", "k": tokens["player_1"], "s": 2, "a": 1})
        final = answer(second)
        assert (final["t"], final["r"], final["te"]) == ("step", 1.0, True)
        assert server.episodes == 1
    finally:
        second.close(0)


@pytest.mark.parametrize("on_timeout", ["null", "done"])
def test_a_silent_player_gets_a_legal_fallback_and_the_other_finishes(judge, on_timeout):
    """player_1 never moves: after one client timeout player_0's step returns (player_1 played 1, the lowest
    legal move, since its null action 0 is masked), then player_0 plays on without waiting and can reset."""
    address, server = judge(RaceGame, client_timeout=0.3, on_timeout=on_timeout)
    tokens = server.tokens
    silent = raw_client(address)
    env = RemoteEnv(address, token=tokens["player_0"], timeout=5)
    try:
        ask(silent, {"t": "hello", "v": P.PROTOCOL_VERSION, "k": tokens["player_1"], "s": 0})
        ask(silent, {"t": "reset", "k": tokens["player_1"], "s": 1})
        env.reset()
        start = time.monotonic()
        obs, reward, terminated, _, _ = env.step(1)
        assert 0.25 < time.monotonic() - start < 3.0
        assert obs["observation"][0] == 2 and not terminated
        late = {"t": "step", "k": tokens["player_1"], "s": 2, "a": 1}
        assert answer(silent)["t"] == "welcome" and answer(silent)["t"] == "reset"
        if on_timeout == "done":
            ask(silent, late)
            cut = answer(silent)
            assert (cut["t"], cut["tr"], cut["te"], cut["i"]["reason"]) == ("step", True, False, "timed_out")
        start, steps = time.monotonic(), 0
        while not terminated:
            obs, reward, terminated, truncated, _ = env.step(1)
            steps += 1
        assert time.monotonic() - start < 1.0 and reward == 1.0 and obs["observation"][0] == 5
        if on_timeout == "null":
            ask(silent, late)
            final = answer(silent)
            assert (final["t"], final["r"], final["te"]) == ("step", -1.0, True)
        assert server.episodes == 1
        obs, _ = env.reset()
        assert obs["observation"][0] == 0 and server.episode_running
    finally:
        env.close()
        silent.close(0)


def test_spawned_judge_hosts_a_turn_based_game():
    """`spawn_judge(..., multi=True, api="aec")` runs the same turn-based hosting in a judge subprocess."""
    proc, address = spawn_judge("slm_lab_like.envs.games.connect_four:ConnectFourEnv", multi=True, api="aec",
                                extra_args=["--client-timeout", "5"])
    try:
        moves = {"player_0": [0, 0, 0, 0], "player_1": [1, 1, 1]}
        got = remote_views(address, moves, proc.judge_info["tokens"])
        assert [(r, te) for _, r, te, _ in got["player_0"][-1:]] == [(1.0, True)]
        assert [(r, te) for _, r, te, _ in got["player_1"][-1:]] == [(-1.0, True)]
    finally:
        stop_judge(proc)


def test_the_api_is_the_envs_own_or_given():
    """make_play reads AEC from the env's class (anything else is parallel); a contradicting api is refused."""
    from pettingzoo.classic import rps_v2

    assert make_play(ConnectFourEnv()).api == "aec"
    assert make_play(rps_v2.parallel_env()).api == "parallel"
    assert make_play(object()).api == "parallel" and make_play(object(), "aec").api == "aec"
    with pytest.raises(ValueError, match="not parallel"):
        make_play(ConnectFourEnv(), "parallel")
    with pytest.raises(ValueError, match="api must be"):
        make_play(ConnectFourEnv(), "turns")


SPEC = {
    "agent": [{"name": "random", "algorithm": {"name": "Random"}}],
    "env": [{"name": "connect_four", "max_frame": 100}, {"name": "tag_arena", "max_frame": 100},
            {"name": "pettingzoo.classic.tictactoe_v3:env", "max_frame": 100},
            {"name": "pettingzoo.classic.rps_v2:parallel_env", "max_frame": 100},
            {"name": "CartPole-v1", "max_frame": 100}],
    "body": {"product": "outer", "num": [2, 4, 2, 2, 1]},
    "meta": {"max_session": 1},
}


def play_random(address: str, token: str | None, seed: int) -> tuple[float, bool]:
    """Play one episode with random legal actions; return the return and whether it ended."""
    env = RemoteEnv(address, token=token, timeout=10)
    rng = np.random.default_rng(seed)
    env.action_space.seed(seed)
    try:
        obs, _ = env.reset(seed=seed)
        total = 0.0
        for _ in range(500):
            if isinstance(obs, dict) and "action_mask" in obs:
                action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
            else:
                action = env.action_space.sample()
            obs, reward, terminated, truncated, _ = env.step(action)
            total += reward
            if terminated or truncated:
                return total, True
        return total, False
    finally:
        env.close()


def test_serve_spec_hosts_aec_parallel_and_single_agent_envs(tmp_path):
    """connect_four and tictactoe turn by turn, tag_arena and rps in parallel, CartPole single: one episode each."""
    from slm_lab_like.spec.load import load

    path = tmp_path / "games.json"
    path.write_text(json.dumps(SPEC))
    out, stop = io.StringIO(), threading.Event()
    host = threading.Thread(target=serve_spec, args=(load(path),), kwargs={"stop": stop, "out": out}, daemon=True)
    host.start()
    try:
        deadline = time.monotonic() + 30
        while out.getvalue().count("\n") < len(SPEC["env"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
        assert [line["env"] for line in lines] == [e["name"] for e in SPEC["env"]]
        for line in lines:
            tokens = list((line["tokens"] or {None: None}).values())
            results: list = []
            address = line["address"]
            threads = [threading.Thread(target=lambda t=t, i=i, out=results, a=address: out.append(play_random(a, t, i)))
                       for i, t in enumerate(tokens)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert len(results) == len(tokens) and all(ended for _, ended in results), line["env"]
            if line["env"] in ("connect_four", "pettingzoo.classic.tictactoe_v3:env"):
                assert sum(r for r, _ in results) == 0 and {abs(r) for r, _ in results} <= {0.0, 1.0}
    finally:
        stop.set()
        host.join(10)


def test_a_players_next_game_waits_for_the_other_player_to_come_back(judge):
    """Both players close after game 1; player_1 resets for game 2 first: the judge waits for player_0 (inside
    join_timeout) instead of playing player_0's seat itself, so player_1's first view holds player_0's real move."""
    address, server = judge(ConnectFourEnv, client_timeout=10.0)
    tokens = server.tokens

    def play_one(name: str, moves: list[int]) -> None:
        env = RemoteEnv(address, token=tokens[name], timeout=10)
        env.reset(seed=0)
        for move in moves:
            if any(env.step(move)[2:4]):
                break
        env.close()
    first = [threading.Thread(target=play_one, args=(n, m)) for n, m in
             (("player_0", [3, 3, 3, 3]), ("player_1", [0, 0, 0, 0]))]
    for t in first:
        t.start()
    for t in first:
        t.join(20)
    assert server.episodes == 1
    seen: list[Any] = []
    late = RemoteEnv(address, token=tokens["player_1"], timeout=10)
    waiting = threading.Thread(target=lambda: seen.append(late.reset(seed=1)[0]))
    waiting.start()
    time.sleep(0.5)
    assert waiting.is_alive() and not server.episode_running  # no game without player_0
    back = RemoteEnv(address, token=tokens["player_0"], timeout=10)
    back.reset(seed=1)
    back_thread = threading.Thread(target=back.step, args=(5,), daemon=True)
    back_thread.start()
    waiting.join(10)
    assert not waiting.is_alive()
    board = seen[0]["observation"]
    assert board.sum() == 1 and board[:, 5].sum() == 1  # player_0's own move, column 5, not a fallback
    # player_1 answers, so player_0's step returns; player_0's close then ends the game under player_1's step.
    # Each client is closed only once no thread is inside it: a ZeroMQ socket closed under a blocked recv aborts.
    answer = threading.Thread(target=late.step, args=(0,), daemon=True)
    answer.start()
    back_thread.join(10)
    assert not back_thread.is_alive()
    back.close()
    answer.join(10)
    assert not answer.is_alive()
    late.close()
