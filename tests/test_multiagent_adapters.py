"""PettingZoo adapters in the lab: turns, masks, credit assignment, done players, null obs/actions, super bodies."""
from __future__ import annotations

import csv
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("pettingzoo")
from pettingzoo import ParallelEnv  # noqa: E402

from slm_lab_like.agents.random_agent import Random  # noqa: E402
from slm_lab_like.envs.base import Clock  # noqa: E402
from slm_lab_like.envs.make import multiagent_factory  # noqa: E402
from slm_lab_like.envs.pettingzoo_env import PettingZooEnv, SlotPlan  # noqa: E402
from slm_lab_like.aeb.space import AEBSpace  # noqa: E402
from slm_lab_like.analysis.metrics import COLUMNS, WALL_COLUMNS  # noqa: E402
from slm_lab_like.experiment.session import Session  # noqa: E402
from slm_lab_like.spec.load import validate  # noqa: E402


def spec(env: dict, agents: list[str] | None = None, num: int | list[int] = 1, seed: int = 3) -> dict:
    """A raw spec of Random agents (or the named algorithms) in one multi-agent env."""
    algos = agents or ["Random"]
    return {"agent": [{"name": f"a{i}", "algorithm": {"name": n}} for i, n in enumerate(algos)],
            "env": [env], "body": {"product": "outer", "num": num},
            "meta": {"random_seed": seed, "log_frequency": 10**9}}


def c4(plans: list[SlotPlan] | None = None, api: str = "aec", **kwargs: Any) -> PettingZooEnv:
    name = "connect_four" if api == "aec" else "connect_four_parallel"
    factory = multiagent_factory(name)
    return PettingZooEnv(name, lambda: factory(**kwargs), api, plans, Clock(max_frame=10**6))


def play(env: PettingZooEnv, moves: list[int]) -> list[dict[str, np.ndarray]]:
    """Step the env with the acting body's column from `moves`; a snapshot of the buffers after each step."""
    blk = env.blocks[0]
    out = []
    for m in moves:
        acting = blk.acting[env.parity].copy()
        blk.action[:] = 6
        blk.action[acting] = m
        before = env.parity
        env.step()
        out.append({"acting": acting, "completed": blk.completed.copy(), "reward": blk.reward.copy(),
                    "action": blk.action.copy(), "terminated": blk.terminated.copy(),
                    "obs": blk.obs[before].copy(), "next_obs": blk.obs[env.parity].copy(),
                    "mask": blk.action_mask[before].copy(), "final_obs": blk.final_obs.copy()})
    return out


def test_turn_based_only_the_mover_acts_and_rewards_reach_the_last_transition() -> None:
    env = c4()
    env.reset(seed=0)
    blk = env.blocks[0]
    assert blk.observation_space.shape == (6, 7, 2) and blk.action_mask is not None
    np.testing.assert_array_equal(blk.acting[env.parity], [True, False])
    start = blk.obs[env.parity].copy()
    steps = play(env, [0, 1, 0, 1, 0, 2, 3, 1, 4])  # player_1 completes a vertical four in column 1 at its 4th move
    assert [s["acting"].tolist() for s in steps] == [[True, False], [False, True]] * 4 + [[True, False]]
    # no transition before each body's next turn; then one per step, alternating
    assert [s["completed"].tolist() for s in steps[:2]] == [[False, False], [True, False]]
    assert all(s["completed"].sum() == 1 for s in steps[1:7])
    # player_0's first transition: its decision obs (the empty board), its move, the board at its next turn
    first = steps[1]
    np.testing.assert_array_equal(first["obs"][0], start[0])
    assert first["action"][0] == 0 and first["reward"][0] == 0
    assert first["next_obs"][0][5, 0, 0] == 1 and first["next_obs"][0][5, 1, 1] == 1
    assert len(env.ended) == 0


def test_win_on_opponent_move_reaches_the_loser_and_both_end() -> None:
    env = c4()
    env.reset(seed=0)
    steps = play(env, [0, 1, 0, 1, 0, 1, 2, 1])  # player_1 wins with its 4th move in column 1
    last = steps[-1]
    assert last["completed"].tolist() == [True, True] and last["terminated"].tolist() == [True, True]
    assert last["reward"].tolist() == [-1.0, 1.0]
    assert last["action"].tolist() == [2, 1]  # player_0's last move is restored in its row
    np.testing.assert_array_equal(last["obs"][0], steps[-2]["next_obs"][0])  # its decision obs, carried forward
    assert last["final_obs"][1][..., 0].sum() == 4 and last["final_obs"][0][..., 1].sum() == 4
    assert [(e.slot, e.ret, e.length) for e in env.ended] == [(0, -1.0, 4), (1, 1.0, 4)]
    assert env.clock.frame == 8 and env.slot_frames == [4, 4]
    blk = env.blocks[0]
    assert blk.acting[env.parity].tolist() == [True, False]  # the env reset itself
    assert blk.obs[env.parity].sum() == 0


def test_parallel_view_matches_aec_and_non_movers_get_their_null_action() -> None:
    moves = [3, 3, 4, 4, 5, 5, 2, 1]
    aec = c4()
    aec.reset(seed=0)
    par = c4([SlotPlan(("player_0",), null_action=6), SlotPlan(("player_1",), null_action=6)], api="parallel")
    par.reset(seed=0)
    sent = []
    original = par.env.step

    def recording_step(actions: dict) -> Any:
        sent.append(dict(actions))
        return original(actions)

    par.env.step = recording_step
    a, p = play(aec, moves), play(par, moves)
    for x, y in zip(a, p):
        for key in x:
            np.testing.assert_array_equal(x[key], y[key], err_msg=key)
    assert sent[0] == {"player_0": 3, "player_1": 6} and sent[1] == {"player_0": 6, "player_1": 3}
    assert [(e.slot, e.ret) for e in aec.ended] == [(e.slot, e.ret) for e in par.ended] == [(0, 1.0), (1, -1.0)]


def test_random_agent_plays_only_legal_moves_through_the_lab() -> None:
    raw = spec({"name": "connect_four", "max_frame": 3000, "kwargs": {"illegal_move": "raise"}}, num=2)
    result = Session(validate(raw, "t"), seed=4).run()
    (a_frames,) = result.env_frames
    bodies = result.metrics
    games = len(bodies[(0, 0, 0)].rows)
    assert games > 50 and len(bodies[(0, 0, 1)].rows) in (games, games - 1, games + 1)
    assert all(r["return"] in (-1.0, 0.0, 1.0) for m in bodies.values() for r in m.rows)
    assert sum(m.rows[-1]["frame"] for m in bodies.values()) <= a_frames
    wins = sum(r["return"] == 1.0 for m in bodies.values() for r in m.rows)
    losses = sum(r["return"] == -1.0 for m in bodies.values() for r in m.rows)
    assert wins == losses


def test_random_legal_sampler_is_uniform_over_legal_actions() -> None:
    from slm_lab_like.agents.base import AgentContext, BodyGroup

    group = BodyGroup(0, 0, "x", gym.spaces.Box(0, 1, (2,)), gym.spaces.Discrete(5), 3, masked=True)
    agent = Random(Random.Config(), AgentContext(groups=[group], seed=0))
    mask = np.array([[0, 1, 0, 1, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]], dtype=bool)
    counts = np.zeros((3, 5))
    for _ in range(3000):
        a = agent.act(0, np.zeros((3, 2), np.float32), mask=mask)
        counts[np.arange(3), a] += 1
    assert (counts[~mask] == 0).all()
    assert abs(counts[0, 1] / 3000 - 0.5) < 0.05 and abs(counts[1] / 3000 - 0.2).max() < 0.04
    assert counts[2, 4] == 3000


def body_table(result: Any) -> dict:
    keep = [c for c in COLUMNS if c not in WALL_COLUMNS and c != "loss"]  # loss is nan for Random
    return {c: [{k: r[k] for k in keep} for r in m.rows] for c, m in result.metrics.items()}


@pytest.mark.parametrize("env", [
    {"name": "connect_four", "max_frame": 1500},
    {"name": "tag_arena", "max_frame": 1500, "kwargs": {"size": 6, "max_cycles": 30}},
])
def test_full_lab_session_on_a_game_is_deterministic(env: dict, tmp_path) -> None:
    num = 2 if env["name"] == "connect_four" else [4]
    raw = spec(env, num=num)
    runs = [Session(validate(raw, "t"), seed=s, out_dir=tmp_path / str(i)).run() for i, s in enumerate((5, 5, 6))]
    assert body_table(runs[0]) == body_table(runs[1])
    assert body_table(runs[0]) != body_table(runs[2])
    with open(tmp_path / "0" / "metrics_a0_e0_b1.csv") as f:
        assert len(list(csv.DictReader(f))) == len(runs[0].metrics[(0, 0, 1)].rows)


def test_tag_arena_done_players_stop_acting_and_show_their_null_obs() -> None:
    raw = spec({"name": "tag_arena", "max_frame": 10**6, "kwargs": {"size": 5, "max_cycles": 50},
                "bodies": [{"entity": {"type": "chaser", "start": [0, 0], "reach": 1}},
                           {"entity": {"type": "runner", "start": [0, 1]}, "null_obs": -0.5},
                           {"entity": {"type": "runner", "start": [4, 4]}, "null_obs": [0.25] * 12}]},
               num=3)
    space = AEBSpace.build(validate(raw, "t"), seed=0)
    try:
        space.env_space.reset(0)
        env = space.env_space.envs[0]
        blk = env.blocks[0]
        assert env.slots[1].players == ("runner_0",) and blk.acting[env.parity].all()
        blk.action[:] = 0  # everyone stays: the chaser catches runner_0 next to it at once
        env.step()
        assert blk.completed.tolist() == [True, True, True]
        assert blk.terminated.tolist() == [False, True, False] and blk.reward.tolist() == [1.0, -1.0, 0.0]
        assert [(e.slot, e.ret, e.length) for e in env.ended] == [(1, -1.0, 1)]
        p = env.parity
        assert blk.acting[p].tolist() == [True, False, True]
        np.testing.assert_array_equal(blk.obs[p][1], np.full(12, -0.5, np.float32))
        sent = []
        original = env.env.step
        env.env.step = lambda actions: (sent.append(dict(actions)), original(actions))[1]
        for _ in range(3):
            env.step()
            assert blk.completed.tolist() == [True, False, True]
            np.testing.assert_array_equal(blk.obs[env.parity][1], np.full(12, -0.5, np.float32))
        assert all(set(s) == {"chaser_0", "runner_1"} for s in sent)
        assert env.slot_frames == [4, 1, 4] and env.clock.frame == 9
    finally:
        space.close()


def test_super_body_concatenates_spaces_and_masks_done_players() -> None:
    raw = spec({"name": "tag_arena", "max_frame": 10**6,
                "bodies": [{"player": ["runner_0", "runner_1"], "null_obs": -1.0}, {"player": "chaser_0"}],
                "kwargs": {"size": 5, "max_cycles": 50,
                           "entities": [{"type": "runner", "start": [0, 1]}, {"type": "runner", "start": [4, 4]},
                                        {"type": "chaser", "start": [0, 0]}]}},
               agents=["Random", "Random"])
    space = AEBSpace.build(validate(raw, "t"), seed=0)
    try:
        space.env_space.reset(0)
        env = space.env_space.envs[0]
        sup, single = env.blocks
        assert sup.observation_space.shape == (2 * 12 + 2,) and sup.action_space == gym.spaces.MultiDiscrete([5, 5])
        sup.action[:] = [0, 0]
        single.action[:] = 0
        env.step()  # runner_0 is caught, runner_1 lives on
        assert sup.reward.tolist() == [-1.0] and not sup.terminated[0] and sup.completed[0]
        obs = sup.obs[env.parity][0]
        np.testing.assert_array_equal(obs[:12], np.full(12, -1.0, np.float32))
        assert obs[-2:].tolist() == [1.0, 0.0] and obs[12:14].tolist() == [1.0, 1.0]
        assert len(env.ended) == 0
    finally:
        space.close()
    raw["env"][0]["bodies"][0]["super_action"] = "joint"
    space = AEBSpace.build(validate(raw, "t"), seed=0)
    try:
        assert space.env_space.envs[0].blocks[0].action_space == gym.spaces.Discrete(25)
    finally:
        space.close()


def test_learner_vs_scripted_through_the_body_mapping_and_seat_swap() -> None:
    env = {"name": "connect_four", "max_frame": 4000}
    raw = spec(env, agents=["Scripted", "Random"])
    raw["agent"][0]["algorithm"]["policy"] = "slm_lab_like.envs.games.connect_four:WinBlockPlayer"
    first = Session(validate(raw, "t"), seed=2).run()
    raw["env"][0]["bodies"] = [{"player": "player_1"}, {"player": "player_0"}]
    second = Session(validate(raw, "t"), seed=2).run()
    for result in (first, second):
        rows = result.metrics[(0, 0, 0)].rows
        wins = sum(r["return"] == 1.0 for r in rows)
        assert len(rows) > 60 and wins / len(rows) > 0.8
    # seat swap: the scripted player moves second, so it makes at most as many moves as Random each game
    assert second.metrics[(0, 0, 0)].rows[0]["t"] <= second.metrics[(1, 0, 0)].rows[0]["t"]


class TurnEnv(ParallelEnv):
    """A two-player parallel env with masks that records every action dict it is sent (for tests)."""

    metadata = {"name": "turn_env_v0"}

    def __init__(self, length: int = 4) -> None:
        self.possible_agents = ["p0", "p1"]
        self.length = length
        self._obs = gym.spaces.Dict({"observation": gym.spaces.Box(0, 10, (1,), np.float32),
                                     "action_mask": gym.spaces.Box(0, 1, (3,), np.int8)})
        self._act = gym.spaces.Discrete(3)
        self.sent: list[dict] = []
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> gym.Space:
        return self._obs

    def action_space(self, agent: str) -> gym.Space:
        return self._act

    def _observations(self) -> dict:
        mover = self.t % 2
        return {a: {"observation": np.array([self.t], np.float32),
                    "action_mask": np.array([1, 1, 0] if i == mover else [0, 0, 0], np.int8)}
                for i, a in enumerate(self.possible_agents)}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.t = 0
        self.agents = self.possible_agents[:]
        return self._observations(), {a: {} for a in self.agents}

    def step(self, actions: dict) -> tuple:
        self.sent.append(dict(actions))
        mover = self.possible_agents[self.t % 2]
        self.t += 1
        done = self.t >= self.length
        rewards = {a: float(actions[mover]) if a == mover else 0.0 for a in self.agents}
        obs = self._observations()
        terms = {a: done for a in self.agents}
        truncs = {a: False for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, {a: {} for a in self.possible_agents}


def test_user_parallel_env_by_module_path_gets_null_actions_and_masks() -> None:
    raw = spec({"name": "tests.test_multiagent_adapters:TurnEnv", "max_frame": 10**6,
                "bodies": [{"role": "p1", "null_action": 2}, {"null_action": 2}]}, num=2)
    space = AEBSpace.build(validate(raw, "t"), seed=0)
    try:
        space.env_space.reset(0)
        env = space.env_space.envs[0]
        assert [s.players for s in env.slots] == [("p1",), ("p0",)]
        (link,) = space.agent_space.links
        agent = link.agent
        for _ in range(8):
            p = env.parity
            link.action[...] = agent.act(0, link.obs[p], mask=link.mask[p], acting=link.acting[p])
            env.step()
        assert all(set(s.values()) <= {0, 1, 2} for s in env.env.sent)
        for k, s in enumerate(env.env.sent):
            mover, idle = ("p0", "p1") if k % 2 == 0 else ("p1", "p0")
            assert s[idle] == 2 and s[mover] in (0, 1)  # the mover's mask allows 0 and 1 only
        assert env.clock.frame == 8 and len(env.ended) == 4
    finally:
        space.close()


def test_a_parallel_env_hands_its_ends_over_in_batches_and_none_is_lost() -> None:
    """A parallel env of one player per body holds its ends back, each with its env and body frames, as copies of a
    gymnasium env do (HOLD_ENDS of them or HOLD_STEPS steps); a session's metrics still count every episode."""
    from slm_lab_like.envs.episodes import HOLD_ENDS, HOLD_STEPS

    space = AEBSpace.build(validate(spec({"name": "spread", "max_frame": 10**6}, num=3), "t"), 0)
    try:
        env = space.env_space.envs[0]
        assert isinstance(env, PettingZooEnv) and env.fast and env.holds_ends
        env.reset(0)
        steps = 0
        while not env.held.n:  # the first episode's ends (25 steps) wait in `held`
            for link in space.agent_space.links:
                link.act(env.parity)
            env.step()
            steps += 1
        assert (steps, env.held.n, env.ended.n) == (25, 3, 0)
        assert env.held.env_frame.tolist() == [75] * 3 and env.held.body_frame.tolist() == [25] * 3
        for _ in range(HOLD_STEPS):
            for link in space.agent_space.links:
                link.act(env.parity)
            env.step()
        assert env.ended.n and env.ended.n < HOLD_ENDS + 3 and env.ended.n + env.held.n == 3 * ((HOLD_STEPS + 25) // 25)
        assert env.flush_ends().n == 3 * ((HOLD_STEPS + 25) // 25) and not env.held.n
    finally:
        space.close()
    result = Session(validate(spec({"name": "spread", "max_frame": 3 * 1000}, num=3), "t"), seed=0).run()
    assert sorted(len(m.rows) for m in result.metrics.values()) == [40, 40, 40]  # 1000 steps: 40 episodes a body
