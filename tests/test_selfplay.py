"""Self-play: one agent owning both seats, the opponent pool wrapper, and (slow) learning to beat random play."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from slm_lab_like.agents.base import AgentContext, BodyGroup, Transition  # noqa: E402
from slm_lab_like.agents.random_agent import Random  # noqa: E402
from slm_lab_like.agents.selfplay import OpponentPool  # noqa: E402
from slm_lab_like.envs.games.connect_four import ConnectFourEnv, WinBlockPlayer  # noqa: E402
from slm_lab_like.aeb.space import AEBSpace  # noqa: E402
from slm_lab_like.experiment.session import Session  # noqa: E402
from slm_lab_like.spec.load import load, validate  # noqa: E402
from tests.helpers import train  # noqa: E402


class RecordingRandom(Random):
    """Random that records the rows it is asked to act for and the rows it learns from (for these tests)."""

    def __init__(self, config: object, ctx: object) -> None:
        super().__init__(config, ctx)  # type: ignore[arg-type]
        self.acted: list[np.ndarray] = []
        self.learned: list[np.ndarray] = []

    def act(self, group: int, obs: np.ndarray, mask: np.ndarray | None = None,
            acting: np.ndarray | None = None) -> np.ndarray:
        assert acting is not None
        self.acted.append(acting.copy())
        return super().act(group, obs, mask=mask, acting=acting)

    def update(self, group: int, transition: Transition) -> None:
        super().update(group, transition)
        self.learned.append(transition.completed.copy())


def selfplay_spec(pool: dict | None = None, frames: int = 3000) -> dict:
    agent = {"name": "sp", "algorithm": {"name": "tests.test_selfplay:RecordingRandom"}}
    if pool is not None:
        agent["opponent_pool"] = pool
    return {"agent": [agent], "env": [{"name": "connect_four", "max_frame": frames}],
            "body": {"product": "outer", "num": 2}, "meta": {"log_frequency": 10**9}}


def test_one_agent_owns_both_seats_and_learns_from_both() -> None:
    space, _ = train(selfplay_spec())
    (agent,) = space.agent_space.agents
    learned = np.array(agent.learned)
    assert learned.sum(axis=0).min() > 1000  # both seats' transitions reach the one agent
    assert (np.array(agent.acted).sum(axis=1) == 1).all()  # one seat acts per step
    assert agent.frame == space.env_space.envs[0].clock.frame


def frozen_moves(pool: OpponentPool) -> int:
    """Moves the pool's snapshot players made (each RecordingRandom records the rows it acted for)."""
    return sum(int(a.sum()) for m in pool.snapshots for a in m.player.acted)


def test_opponent_pool_frozen_seat_is_not_learned_from() -> None:
    space, _ = train(selfplay_spec({"size": 2, "refresh_frames": 200, "prob": 1.0}, frames=4000))
    (pool,) = space.agent_space.agents
    assert isinstance(pool, OpponentPool)
    learner = pool.learner
    assert pool.snapshots_taken >= 8 and len(pool.pool) == 2
    assert frozen_moves(pool) > 500  # snapshots played many moves
    learned = np.array(learner.learned)
    # once snapshots exist, every game has a frozen seat, so most learner updates hold one row only
    assert (learned.sum(axis=1) == 1).mean() > 0.9
    assert learner.frame < space.env_space.envs[0].clock.frame * 0.7
    own_moves = sum(int(a.sum()) for a in learner.acted)
    assert own_moves + frozen_moves(pool) == space.env_space.envs[0].clock.frame


def test_opponent_pool_random_seat_plays_legal_random_moves_outside_the_learner() -> None:
    raw = selfplay_spec({"size": 2, "refresh_frames": 10**6, "prob": 0.0, "random_prob": 1.0}, frames=3000)
    raw["env"][0]["kwargs"] = {"illegal_move": "raise"}
    space, _ = train(raw)
    (pool,) = space.agent_space.agents
    learner = pool.learner
    assert not pool.pool and not pool.snapshots  # no snapshot yet: the random seat needs none
    learned = np.array(learner.learned)
    assert (learned.sum(axis=1) == 1).mean() > 0.95 and learned.sum(axis=0).min() > 300  # both seats, in turn
    moves = space.env_space.envs[0].clock.frame
    assert 0.4 * moves < sum(int(a.sum()) for a in learner.acted) < 0.6 * moves


def test_opponent_pool_session_is_deterministic() -> None:
    raw = selfplay_spec({"size": 3, "refresh_frames": 300, "prob": 0.5}, frames=3000)
    a = [r["return"] for m in Session(validate(raw, "t"), seed=4).run().metrics.values() for r in m.rows]
    b = [r["return"] for m in Session(validate(raw, "t"), seed=4).run().metrics.values() for r in m.rows]
    assert a == b and len(a) > 100


def test_opponent_pool_in_a_batch_env_draws_the_seats_of_each_game() -> None:
    pool = {"size": 2, "refresh_frames": 300, "prob": 0.4, "random_prob": 0.4, "game_seats": 2}
    raw = selfplay_spec(pool, frames=8000)
    raw["env"][0].update(name="connect_four_batch", kwargs={"illegal_move": "raise"})  # random seats move legally
    raw["body"]["num"] = 16
    space, _ = train(raw)
    (agent,) = space.agent_space.agents
    learner = agent.learner
    assert agent.snapshots_taken >= 8 and len(agent.pool) == 2
    assert (agent.frozen_rows[0].reshape(8, 2).sum(axis=1) <= 1).all()  # at most one seat of a game is not the learner's
    moves = space.env_space.envs[0].clock.frame
    own, theirs = sum(int(a.sum()) for a in learner.acted), frozen_moves(agent)
    assert 0.5 * moves < own < 0.85 * moves and theirs > 0.05 * moves
    assert moves - own - theirs > 0.05 * moves  # the rest: uniform random seats
    learned = np.array(learner.learned)
    assert learned.sum(axis=0).min() > 50  # every seat of every game reaches the learner


def test_opponent_pool_game_seats_must_split_the_group_into_games() -> None:
    raw = selfplay_spec({"game_seats": 3})
    raw["env"][0]["name"] = "connect_four_batch"
    raw["body"]["num"] = 16
    with pytest.raises(ValueError, match="game_seats: 16 bodies .* not whole games of 3 seats"):
        AEBSpace.build(validate(raw, "t"), 0)


def play_vs_random(agent: object, games: int, seat: int, seed: int,
                   opponent: Any = None) -> tuple[int, int, int]:
    """(wins, draws, losses) of `agent` (group 0, greedy) from `seat` against uniform random play, or against
    `opponent` (a player called with the observation dict) when given."""
    rng = np.random.default_rng(seed)
    env = ConnectFourEnv()
    wins = draws = losses = 0
    for _ in range(games):
        env.reset()
        while env.agents:
            name = env.agent_selection
            obs, _, term, trunc, _ = env.last()
            if term or trunc:
                env.step(None)
                continue
            mask = obs["action_mask"].astype(bool)
            if env.possible_agents.index(name) == seat:
                action = int(np.asarray(agent.act(0, obs["observation"][None], mask=mask[None],
                                                  acting=np.ones(1, bool)))[0])
            elif opponent is not None:
                action = int(opponent(obs))
            else:
                action = int(rng.choice(np.flatnonzero(mask)))
            env.step(action)
            if env.game.done:
                winner = env.game.winner
                wins += winner == seat
                losses += winner is not None and winner != seat
                draws += winner is None
                break
    return wins, draws, losses


def trained_greedy(name: str) -> tuple[Any, int, float]:
    """The first agent of spec/NAME.json trained with seed 1, set greedy; its frames and training seconds."""
    start = time.perf_counter()
    space, _ = train(load(f"spec/{name}.json"), seed=1)
    wall = time.perf_counter() - start
    agent = space.agent_space.agents[0]
    agent.set_training(False)
    return agent, sum(env.clock.frame for env in space.env_space.envs), wall


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(1800)  # minutes of training, longer beside other tests
def test_selfplay_spec_beats_random_play_from_both_seats() -> None:
    """Issue 4's bar: after the spec's training, >= 95% of 200 games (100 per seat) won or drawn against random."""
    agent, frames, wall = trained_greedy("selfplay_connect_four")
    results = {seat: play_vs_random(agent, 100, seat, seed=seat) for seat in (0, 1)}
    print(f"\nself-play connect four: {frames} frames, {wall:.0f} s; vs uniform random, 100 games per seat "
          f"(win, draw, loss): first seat {results[0]}, second seat {results[1]}")
    not_lost = sum(w + d for w, d, _ in results.values())
    assert not_lost >= 190, results


def test_evaluation_helper_counts_games() -> None:
    env = ConnectFourEnv()
    group = BodyGroup(0, 0, "connect_four", env.observation_space("player_0")["observation"],
                      env.action_space("player_0"), 2, masked=True, turns=True)
    agent = Random(Random.Config(), AgentContext(groups=[group], seed=0))
    w, d, l_ = play_vs_random(agent, 40, 0, seed=0)
    assert w + d + l_ == 40 and w > 0 and l_ > 0


WIN_BLOCK = "slm_lab_like.envs.games.connect_four:WinBlockPlayer"


def league_pool(sampling: str) -> dict:
    return {"size": 2, "refresh_frames": 10**6, "prob": 0.0, "random_prob": 0.3, "scripted": [WIN_BLOCK],
            "scripted_prob": 0.5, "sampling": sampling, "game_seats": 2}


def batch_spec(pool: dict, frames: int = 8000) -> dict:
    raw = selfplay_spec(pool, frames=frames)
    raw["env"][0].update(name="connect_four_batch", kwargs={"illegal_move": "raise"})
    raw["body"]["num"] = 16
    return raw


@pytest.mark.parametrize("sampling", ["uniform", "pfsp"])
def test_pfsp_draws_the_members_the_learner_loses_to_more_often(sampling: str) -> None:
    space, _ = train(batch_spec(league_pool(sampling)))
    (pool,) = space.agent_space.agents
    members = {m.name: m for m in pool.members}
    assert set(members) == {"random", "WinBlockPlayer"}
    block, rand = members["WinBlockPlayer"], members["random"]
    assert block.score < 0.25 and 0.3 < rand.score < 0.7  # random play loses to WinBlockPlayer, halves with random
    ratio = block.games / rand.games
    if sampling == "uniform":
        assert 1.2 < ratio < 2.2  # scripted_prob / random_prob = 1.67
    else:
        assert ratio > 2.5  # weights (1 - score)^2: about 0.8 against 0.25
    stats = pool.pool_stats()
    assert stats["pool/rating/learner"] < stats["pool/rating/WinBlockPlayer"]
    assert stats["pool/score/WinBlockPlayer"] == block.score


def test_pool_figures_reach_the_learners_stats_rows(tmp_path: Path) -> None:
    raw = batch_spec(league_pool("pfsp"), frames=3000)
    raw["agent"][0].update(algorithm={"name": "PPO", "n_epochs": 1, "minibatch_size": 64},
                           memory={"name": "OnPolicyBatch", "n_steps": 16}, net={"name": "MLP", "hid_layers": [16]})
    Session(validate(raw, "t"), seed=0, out_dir=tmp_path).run()
    header = (tmp_path / "train_a0.csv").read_text().splitlines()[0].split(",")
    assert {"train/policy_loss", "pool/score/WinBlockPlayer", "pool/rating/learner", "pool/score/random"} <= set(header)


def test_pool_scores_and_ratings_survive_a_checkpoint() -> None:
    space, _ = train(batch_spec({**league_pool("pfsp"), "prob": 0.2, "refresh_frames": 500}, frames=4000))
    (pool,) = space.agent_space.agents
    state = pool.state_dict()
    fresh, _ = train(batch_spec({**league_pool("pfsp"), "prob": 0.2, "refresh_frames": 500}, frames=10))
    (other,) = fresh.agent_space.agents
    other.load_state_dict(state)
    assert [m.name for m in other.members] == [m.name for m in pool.members]
    assert [(m.score, m.games) for m in other.members] == [(m.score, m.games) for m in pool.members]
    assert other.pool_stats() == pool.pool_stats()


@pytest.mark.parametrize("pool,key,message", [
    ({"scripted_prob": 0.3}, "scripted_prob", "needs players in scripted"),
    ({"scripted": ["nowhere:Nothing"], "scripted_prob": 0.3}, "scripted[0]", "cannot load policy"),
    ({"prob": 0.6, "random_prob": 0.5}, "prob", "at most 1"),
    ({"sampling": "elo"}, "sampling", "expected one of"),
], ids=["no-scripted", "bad-path", "share", "sampling"])
def test_bad_pools_are_one_line_errors_at_their_key(pool: dict, key: str, message: str) -> None:
    from slm_lab_like.spec.errors import SpecError

    with pytest.raises(SpecError) as err:
        validate(selfplay_spec(pool), "t")
    assert err.value.path == f"agent[0].opponent_pool.{key}" and message in err.value.message


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(1800)  # minutes of training, longer beside other tests
def test_league_spec_beats_win_block_from_both_seats() -> None:
    """Issue 13's bar: the league spec's agent (WinBlockPlayer, random play and its snapshots in a pfsp pool) wins
    >= 60% of 200 games (100 per seat) against WinBlockPlayer; 3M frames, about 5 minutes on 2 idle cores."""
    agent, frames, wall = trained_greedy("league_connect_four")
    results = {seat: play_vs_random(agent, 100, seat, seed=seat, opponent=WinBlockPlayer(seed=100 + seat))
               for seat in (0, 1)}
    print(f"\nleague connect four: {frames} frames, {wall:.0f} s; vs WinBlockPlayer, 100 games per seat "
          f"(win, draw, loss): first seat {results[0]}, second seat {results[1]}")
    assert sum(w for w, _, _ in results.values()) >= 120, results


def trained_scores(spec: Any, out: Path, opponents: dict[str, dict[str, Any]]) -> tuple[float, dict[str, float]]:
    """Train `spec` as a trial under `out`; its training seconds and its first agent's score (greedy, two random
    opening plies, 100 games a seat) against each of `opponents` ({name: player keys})."""
    from slm_lab_like.experiment.tournament import run_tournament
    from slm_lab_like.experiment.trial import run_trial
    from slm_lab_like.spec.load import tournament_spec

    start = time.perf_counter()
    run = run_trial(spec, out).out_dir
    wall = time.perf_counter() - start
    scores = {}
    for name, player in opponents.items():
        raw = {"tournament": {"game": {"name": "connect_four"}, "games": 200, "opening_moves": 2,
                              "players": [{"name": "agent", "checkpoint": str(run)}, {"name": name, **player}]},
               "meta": {"random_seed": 1}}
        rows = {r["player"]: r for r in run_tournament(tournament_spec(raw, name), None).leaderboard}
        scores[name] = rows["agent"]["score"]
    return wall, scores


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(3600)  # minutes of training, longer beside other tests
def test_search_league_spec_holds_its_strength_at_an_eighth_of_its_budget(tmp_path: Path) -> None:
    """Issue 28's recipe at 1M frames (the spec trains 8M; its learning rate then decays over the 1M): greedy, two
    random opening plies, 100 games a seat, it scores >= 0.85 against random play and >= 0.35 against
    WinBlockPlayer (measured 2026-11-28, seed 1: 0.915 and 0.485, 307 s of training on 2 cores)."""
    spec = load("spec/league_connect_four_search.json",
                overrides=["env[0].max_frame=1000000", "agent[0].net.optim.lr.frames=1000000"])
    wall, scores = trained_scores(spec, tmp_path, {"random": {"scripted": "random"}, "win_block": {"scripted": WIN_BLOCK}})
    print(f"\nsearch league connect four at 1M frames ({wall:.0f} s): scores {scores}")
    assert scores["random"] >= 0.85 and scores["win_block"] >= 0.35, scores


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(3600)  # minutes of training, longer beside other tests
def test_expert_iteration_spec_holds_its_strength_at_a_small_budget(tmp_path: Path) -> None:
    """Issue 28's expert-iteration recipe at 160k frames (the spec trains 2M; its learning rate then decays over the
    160k): greedy raw policy, two random opening plies, 100 games a seat, it scores >= 0.75
    against WinBlockPlayer and >= 0.45 against MCTS with 100 random-rollout simulations. The shipped recipe (conv
    net with a 4x4 first layer, completed-Q, proven positions, random openings, value mix) scored 0.825 and 0.585
    here (304 s on one core, 2026-12-04), 0.795 and 0.55 with the learner thread (364 s on 2 cores of a slower
    machine); the 3x3 net before it 0.7975 and 0.5, the first MLP recipe 0.54 and 0.285; its full 2M-frame runs score
    0.973-0.975 against WinBlockPlayer (0.968-0.971 at 1.5M frames, 0.946-0.961 at 900k)."""
    spec = load("spec/expert_iteration_connect_four.json",
                overrides=["env[0].max_frame=160000", "agent[0].net.optim.lr.frames=160000"])
    mcts_100 = {"scripted": "slm_lab_like.envs.mcts:MCTSPlayer", "kwargs": {"simulations": 100}}
    wall, scores = trained_scores(spec, tmp_path, {"win_block": {"scripted": WIN_BLOCK}, "mcts_100": mcts_100})
    print(f"\nexpert iteration connect four at 160k frames ({wall:.0f} s): scores {scores}")
    assert scores["win_block"] >= 0.75 and scores["mcts_100"] >= 0.45, scores
