"""Search players: the game-position protocol (the built-in game's own copy, PettingZoo classic games by copying the
env), UCT with random rollouts (takes wins, blocks losses, proves forced wins, beats random play), and the MCTS
player in tournaments (handed the game by the referee, its time per move reported) and in an opponent pool (from
observations only)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from slm_lab_like.envs.games.connect_four import ConnectFour, ConnectFourEnv, WinBlockPlayer  # noqa: E402
from slm_lab_like.envs.mcts import MCTS, MCTSPlayer  # noqa: E402
from slm_lab_like.envs.search import AECState, SearchState, search_state  # noqa: E402
from slm_lab_like.experiment.tournament import run_tournament  # noqa: E402
from slm_lab_like.spec.errors import SpecError  # noqa: E402
from slm_lab_like.spec.load import tournament_spec  # noqa: E402
from tests.helpers import game_of  # noqa: E402

MCTS_PLAYER = "slm_lab_like.envs.mcts:MCTSPlayer"


def play_out(first: object, second: object, seed: int) -> list[float]:
    """A whole connect four game between two observation-fed players (first moves first); its returns."""
    game, rng = ConnectFour(), np.random.default_rng(seed)
    for _ in range(2):  # two random openings, so that games differ
        game.play(int(rng.choice(game.legal_moves())))
    players = (first, second)
    while not game.is_terminal():
        me = game.current_player()
        obs = {"observation": game.planes(me), "action_mask": game.legal_mask()}
        game.play(int(players[me](obs)))  # type: ignore[operator]
    return game.returns()


def test_connect_four_is_a_search_state_whose_copies_are_independent() -> None:
    game = game_of([3, 3, 2])
    assert isinstance(game, SearchState)
    branch = game.copy()
    branch.apply(4)
    assert game.num_moves == 3 and branch.num_moves == 4 and game.current_player() == 1 != branch.current_player()
    assert game.board[5, 4] == 0 and branch.board[5, 4] == 2
    won = game_of([0, 6, 1, 6, 2, 6, 3])
    assert won.is_terminal() and won.returns() == [1.0, -1.0] and won.legal_actions() == []
    seen = ConnectFour.from_observation({"observation": game.planes(1), "action_mask": game.legal_mask()})
    assert seen.current_player() == 0 and (seen.board == np.where(game.board == 0, 0, 3 - game.board)).all()


def test_search_state_takes_the_games_own_copy_or_copies_a_pettingzoo_env() -> None:
    from pettingzoo.classic import connect_four_v3, tictactoe_v3

    env = ConnectFourEnv()
    env.step(3)
    own = search_state(env)
    assert isinstance(own, ConnectFour) and own.num_moves == 1 and own is not env.game
    theirs = connect_four_v3.env()
    theirs.reset(seed=0)
    theirs.step(3)
    state = search_state(theirs)
    assert isinstance(state, AECState) and state.current_player() == 1 and state.legal_actions() == list(range(7))
    for _ in range(3):
        state.apply(3)
    assert theirs.unwrapped.board.count(0) == 41 and theirs.agent_selection == "player_1"  # the game is untouched
    ttt = tictactoe_v3.env()
    ttt.reset(seed=0)
    for square in (0, 3, 1, 4):  # X on 0 and 1, O on 3 and 4: X wins at 2
        ttt.step(square)
    assert MCTS(200, seed=0).search(search_state(ttt)) == 2
    from slm_lab_like.envs.games.tag_arena import TagArenaEnv

    with pytest.raises(ValueError, match="not a turn-based"):
        search_state(TagArenaEnv())


def test_mcts_takes_a_win_blocks_a_loss_and_proves_a_forced_win() -> None:
    assert MCTS(50, seed=1).search(game_of([0, 6, 1, 6, 2, 5])) == 3  # win in one
    assert MCTS(300, seed=1).search(game_of([0, 6, 1, 6, 2])) == 3  # the only move that does not lose
    # player 0 has 1, 2, 3 on the bottom row with both ends open: any block loses; the solver proves the root won
    mcts = MCTS(2000, seed=1)
    assert mcts.search(game_of([1, 1, 2, 2])) in (0, 3)
    with pytest.raises(ValueError, match="simulations >= 1"):
        MCTS(0)


def test_mcts_beats_random_play_and_win_block_from_both_seats() -> None:
    from slm_lab_like.envs.games.connect_four import RandomPlayer

    results = []
    for seed in range(4):
        results.append(play_out(MCTSPlayer(seed=seed, simulations=200), RandomPlayer(seed), seed)[0])
        results.append(play_out(RandomPlayer(seed), MCTSPlayer(seed=seed, simulations=200), seed)[1])
    assert results == [1.0] * 8
    block = [play_out(MCTSPlayer(seed=s, simulations=200), WinBlockPlayer(s), s)[0] for s in range(5)]
    block += [play_out(WinBlockPlayer(s), MCTSPlayer(seed=s, simulations=200), s)[1] for s in range(5)]
    assert sum(r > 0 for r in block) >= 7  # MCTS-100 scored 0.9 against it over 40 games of the ladder


def test_a_tournament_seats_mcts_players_and_reports_their_time_per_move(tmp_path: Path) -> None:
    raw = {"tournament": {"game": {"name": "connect_four"}, "games": 4, "opening_moves": 2, "players": [
        {"name": "win_block", "scripted": "slm_lab_like.envs.games.connect_four:WinBlockPlayer"},
        {"name": "mcts_200", "scripted": MCTS_PLAYER, "kwargs": {"simulations": 200}}]}, "meta": {"random_seed": 3}}
    result = run_tournament(tournament_spec(raw, "t"), tmp_path)
    rows = {r["player"]: r for r in result.leaderboard}
    assert rows["mcts_200"]["wins"] >= 3 and rows["mcts_200"]["s_per_move"] > rows["win_block"]["s_per_move"] > 0
    assert all(sum(g["seat_moves"]) == g["moves"] - 2 for g in result.games)  # openings are no seat's choice
    assert "s / move" in (result.out_dir / "leaderboard.md").read_text()


def test_an_mcts_player_searches_pettingzoos_own_connect_four_through_the_referee(tmp_path: Path) -> None:
    raw = {"tournament": {"game": {"name": "pettingzoo.classic.connect_four_v3:env"}, "games": 2, "players": [
        {"name": "random", "scripted": "random"},
        {"name": "mcts_30", "scripted": MCTS_PLAYER, "kwargs": {"simulations": 30}}]}, "meta": {"random_seed": 1}}
    result = run_tournament(tournament_spec(raw, "t"), None)
    assert [g["forfeit"] for g in result.games] == [None, None]
    assert {r["player"]: r["wins"] for r in result.leaderboard}["mcts_30"] == 2


@pytest.mark.parametrize("player, where, words", [
    ({"name": "m", "scripted": MCTS_PLAYER, "kwargs": {"simulations": 0}}, "players[1].kwargs", "simulations >= 1"),
    ({"name": "m", "scripted": MCTS_PLAYER, "kwargs": {"simulation": 10}}, "players[1].kwargs", "unexpected keyword"),
    ({"name": "m", "scripted": MCTS_PLAYER, "kwargs": {"game": "nowhere:Game"}}, "players[1].kwargs",
     'cannot load game "nowhere:Game"'),
    ({"name": "m", "scripted": "random", "kwargs": {"simulations": 10}}, "players[1].kwargs", "only a scripted"),
])
def test_bad_player_arguments_are_one_line_errors_at_kwargs(player: dict, where: str, words: str) -> None:
    raw = {"tournament": {"game": {"name": "connect_four"}, "players": [{"name": "r", "scripted": "random"}, player]}}
    with pytest.raises(SpecError) as err:
        tournament_spec(raw, "t")
    assert err.value.path == f"tournament.{where}" and words in str(err.value) and "\n" not in str(err.value)


def test_an_opponent_pool_takes_an_mcts_member_that_sees_only_observations() -> None:
    from tests.helpers import train

    raw = {"agent": [{"name": "learner", "algorithm": {"name": "PPO", "n_epochs": 1, "minibatch_size": 64},
                      "memory": {"name": "OnPolicyBatch", "n_steps": 8},
                      "net": {"name": "MLP", "hid_layers": [32]},
                      "opponent_pool": {"scripted": [{"policy": MCTS_PLAYER, "kwargs": {"simulations": 10},
                                                      "name": "mcts_10"}],
                                        "scripted_prob": 1.0, "prob": 0.0, "game_seats": 2}}],
           "env": [{"name": "connect_four_batch", "max_frame": 600}],
           "body": {"product": "outer", "num": 8}, "meta": {"random_seed": 1, "log_frequency": 10_000}}
    space, _ = train(raw)
    (pool,) = space.agent_space.agents
    member = pool.fixed[0]
    assert member.name == "mcts_10" and member.games > 0 and member.player.moves > 0
    assert pool.pool_stats()["pool/score/mcts_10"] < 0.5  # a fresh learner loses to search


def uniform_evaluator(state: SearchState) -> tuple[dict[int, float], list[float]]:
    legal = state.legal_actions()
    return {a: 1.0 / len(legal) for a in legal}, [0.0] * len(state.returns())


def test_puct_over_an_evaluator_takes_wins_and_blocks_and_follows_strong_priors() -> None:
    assert MCTS(50, seed=0, evaluator=uniform_evaluator).search(game_of([0, 6, 1, 6, 2, 5])) == 3
    assert MCTS(200, seed=0, evaluator=uniform_evaluator).search(game_of([0, 6, 1, 6, 2])) == 3
    calls = []

    def fond_of_five(state: SearchState) -> tuple[dict[int, float], list[float]]:
        calls.append(1)
        legal = state.legal_actions()
        return {a: (0.94 if a == 5 else 0.01) for a in legal}, [0.0, 0.0]

    assert MCTS(30, seed=0, evaluator=fond_of_five).search(ConnectFour()) == 5
    assert len(calls) == 30  # one evaluation a simulation, no rollouts


def test_a_checkpoint_player_searches_over_its_own_heads_at_play_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slm_lab_like.experiment.players import SearchingAgent
    from tests.test_exploit import target_run

    calls = {"moves": 0, "evaluations": 0}
    choose, evaluate = SearchingAgent.__call__, SearchingAgent.evaluate

    def counted_choose(self: SearchingAgent, obs: object) -> object:
        calls["moves"] += 1
        return choose(self, obs)

    def counted_evaluate(self: SearchingAgent, state: object) -> object:
        calls["evaluations"] += 1
        return evaluate(self, state)

    monkeypatch.setattr(SearchingAgent, "__call__", counted_choose)
    monkeypatch.setattr(SearchingAgent, "evaluate", counted_evaluate)
    run = target_run(tmp_path / "runs", frames=400)
    raw = {"tournament": {"game": {"name": "connect_four"}, "games": 4, "opening_moves": 2, "players": [
        {"name": "raw", "checkpoint": str(run)},
        {"name": "searching", "checkpoint": str(run), "search": {"simulations": 60}}]}, "meta": {"random_seed": 1}}
    result = run_tournament(tournament_spec(raw, "t"), None)
    rows = {r["player"]: r for r in result.leaderboard}
    assert rows["searching"]["wins"] >= 3 and rows["searching"]["s_per_move"] > 0 < rows["raw"]["s_per_move"]
    assert calls["moves"] > 0 and calls["evaluations"] >= 30 * calls["moves"]  # the heads, searched at every move
    bad = {"tournament": {"game": {"name": "connect_four"}, "players": [
        {"name": "r", "scripted": "random"}, {"name": "s", "scripted": "random", "search": {"simulations": 5}}]}}
    with pytest.raises(SpecError) as err:
        tournament_spec(bad, "t")
    assert err.value.path == "tournament.players[1].search" and "only a checkpoint player" in err.value.message
