"""Connect four: PettingZoo API and seed tests, multi-step determinism, hand-worked boards, masks, scripted players."""
from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pettingzoo")
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test  # noqa: E402

from slm_lab_like.envs.games.connect_four import (  # noqa: E402
    COLS,
    ROWS,
    ConnectFour,
    ConnectFourEnv,
    ConnectFourParallelEnv,
    RandomPlayer,
    WinBlockPlayer,
    random_legal_action,
)


def brute_winner(board: np.ndarray) -> int | None:
    """Winner (0 or 1) of a 0/1/2 board by scanning every window of four; None if nobody has four."""
    found = set()
    for r in range(ROWS):
        for c in range(COLS):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                cells = [(r + k * dr, c + k * dc) for k in range(4)]
                if all(0 <= y < ROWS and 0 <= x < COLS for y, x in cells):
                    values = {int(board[y, x]) for y, x in cells}
                    if len(values) == 1 and 0 not in values:
                        found.add(values.pop() - 1)
    assert len(found) <= 1
    return found.pop() if found else None


def play_all(moves: list[int]) -> ConnectFour:
    """A game after the given columns."""
    game = ConnectFour()
    for col in moves:
        game.play(col)
    return game


# A full board with no four in a line (rows listed top to bottom), 21 pieces each.
DRAW_BOARD = np.array(
    [
        [1, 1, 2, 2, 1, 1, 2],
        [2, 2, 1, 1, 2, 2, 1],
        [1, 1, 2, 2, 1, 1, 2],
        [2, 2, 1, 1, 2, 2, 1],
        [1, 1, 2, 2, 1, 1, 2],
        [2, 2, 1, 1, 2, 2, 1],
    ],
    dtype=np.int8,
)


def moves_to_reach(target: np.ndarray) -> list[int]:
    """An alternating move order (player 0 first) that builds ``target`` from the empty board, by search."""
    heights = [0] * COLS
    path: list[int] = []

    def search(player: int) -> bool:
        if len(path) == ROWS * COLS:
            return True
        for c in range(COLS):
            h = heights[c]
            if h < ROWS and target[ROWS - 1 - h, c] == player + 1:
                heights[c] += 1
                path.append(c)
                if search(1 - player):
                    return True
                heights[c] -= 1
                path.pop()
        return False

    assert search(0)
    return path


# --------------------------------------------------------------------------- PettingZoo API


def test_aec_api_and_seed() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        api_test(ConnectFourEnv(), num_cycles=200)
        seed_test(ConnectFourEnv, num_cycles=200)


def test_parallel_api_and_seed() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parallel_api_test(ConnectFourParallelEnv(), num_cycles=200)
        parallel_seed_test(ConnectFourParallelEnv, num_cycles=200)


def test_spaces_are_the_same_object_and_obs_fits() -> None:
    env = ConnectFourEnv()
    env.reset(seed=3)
    for agent in env.possible_agents:
        assert env.observation_space(agent) is env.observation_space(agent)
        assert env.action_space(agent) is env.action_space(agent)
    obs = env.observe("player_0")
    assert env.observation_space("player_0").contains(obs)
    assert obs["observation"].dtype == np.int8 and obs["action_mask"].dtype == np.int8
    assert obs["action_mask"].tolist() == [1] * COLS
    assert env.observe("player_1")["action_mask"].tolist() == [0] * COLS
    assert obs is not env.observe("player_0")


# --------------------------------------------------------------------------- determinism


def _aec_trajectory(seed: int, actions_rng: np.random.Generator, steps: int) -> list:
    """(agent, obs, reward, term, trunc, info) for ``steps`` AEC steps, resetting after each game."""
    env = ConnectFourEnv()
    env.reset(seed=seed)
    out = []
    for _ in range(steps):
        agent = env.agent_selection
        obs, reward, term, trunc, info = env.last()
        out.append((agent, obs["observation"].tobytes(), obs["action_mask"].tobytes(), reward, term, trunc, dict(info)))
        if not env.agents:
            env.reset()
            continue
        env.step(None if term or trunc else random_legal_action(obs["action_mask"], actions_rng))
        if not env.agents:
            env.reset()
    return out


def test_aec_multi_step_determinism_across_games() -> None:
    first = _aec_trajectory(7, np.random.default_rng(11), 300)
    second = _aec_trajectory(7, np.random.default_rng(11), 300)
    assert first == second
    assert sum(1 for step in first if step[4]) >= 4  # several games ended inside the 300 steps


def test_parallel_multi_step_determinism_across_games() -> None:
    def run() -> list:
        env = ConnectFourParallelEnv()
        obs, _ = env.reset(seed=5)
        rng = np.random.default_rng(9)
        trace = []
        for _ in range(250):
            actions = {a: random_legal_action(obs[a]["action_mask"], rng) for a in env.agents if obs[a]["action_mask"].any()}
            obs, rew, term, trunc, info = env.step(actions)
            trace.append(({a: o["observation"].tobytes() + o["action_mask"].tobytes() for a, o in obs.items()}, rew, term, trunc, info))
            if not env.agents:
                obs, _ = env.reset()
        return trace

    a, b = run(), run()
    assert a == b
    assert sum(1 for step in a if all(step[2].values())) >= 4


# --------------------------------------------------------------------------- hand-worked boards


@pytest.mark.parametrize(
    ("moves", "winner"),
    [
        ([0, 0, 1, 1, 2, 2, 3], 0),  # bottom row, player 0
        ([6, 0, 6, 1, 6, 2, 5, 3], 1),  # bottom row, player 1
        ([3, 4, 3, 4, 3, 4, 3], 0),  # column 3
        ([0, 1, 1, 2, 2, 3, 2, 3, 3, 6, 3], 0),  # rising diagonal (0,0) (1,1) (2,2) (3,3)
        ([6, 5, 5, 4, 4, 3, 4, 3, 3, 0, 3], 0),  # falling diagonal (0,6) (1,5) (2,4) (3,3)
        ([0, 3, 0, 3, 0, 3, 1, 3], 1),  # column 3, player 1
    ],
)
def test_wins_in_rows_columns_and_diagonals(moves: list[int], winner: int) -> None:
    game = play_all(moves[:-1])
    assert not game.done and game.winner is None
    assert moves[-1] in game.winning_moves(winner)
    game.play(moves[-1])
    assert game.done and game.winner == winner == brute_winner(game.board)
    assert game.legal_mask().tolist() == [0] * COLS
    with pytest.raises(ValueError, match="game over"):
        game.play(0)


def test_aec_rewards_on_a_win() -> None:
    env = ConnectFourEnv()
    env.reset(seed=0)
    for col in [3, 4, 3, 4, 3, 4, 3]:
        env.step(col)
    assert env.terminations == {"player_0": True, "player_1": True}
    assert env._cumulative_rewards == {"player_0": 1, "player_1": -1}
    _, reward, term, _, _ = env.last()
    assert env.agent_selection == "player_1" and reward == -1 and term
    env.step(None)
    _, reward, term, _, _ = env.last()
    assert env.agent_selection == "player_0" and reward == 1 and term
    env.step(None)
    assert env.agents == []


def test_draw_board() -> None:
    assert brute_winner(DRAW_BOARD) is None
    game = ConnectFour.from_board(DRAW_BOARD)
    assert game.done and game.winner is None and game.legal_mask().sum() == 0
    moves = moves_to_reach(DRAW_BOARD)
    env = ConnectFourEnv()
    env.reset(seed=0)
    for col in moves[:-1]:
        env.step(col)
        assert not any(env.terminations.values())
    env.step(moves[-1])
    assert all(env.terminations.values()) and env.rewards == {"player_0": 0, "player_1": 0}
    assert np.array_equal(env.game.board, DRAW_BOARD)


def test_masks_follow_full_columns() -> None:
    game = play_all([2, 2, 2, 2, 2, 2])
    assert game.legal_mask().tolist() == [1, 1, 0, 1, 1, 1, 1]
    assert game.legal_moves() == [0, 1, 3, 4, 5, 6]
    planes = game.planes(0)
    assert planes[:, 2, 0].tolist() == [0, 1, 0, 1, 0, 1] and planes[:, 2, 1].tolist() == [1, 0, 1, 0, 1, 0]
    assert planes[:, :, 0].sum() == planes[:, :, 1].sum() == 3


def test_from_board_rejects_floating_pieces() -> None:
    board = np.zeros((ROWS, COLS), dtype=np.int8)
    board[0, 0] = 1
    with pytest.raises(ValueError, match="floating"):
        ConnectFour.from_board(board)


# --------------------------------------------------------------------------- illegal moves


def test_illegal_move_loses_by_default() -> None:
    env = ConnectFourEnv()
    env.reset(seed=0)
    for _ in range(ROWS):
        env.step(0)
    assert env.agent_selection == "player_0"
    env.step(0)
    assert all(env.terminations.values())
    assert env.rewards == {"player_0": -1, "player_1": 1}
    assert env.infos["player_0"] == {"illegal_move": True}
    assert env.observe("player_1")["action_mask"].sum() == 0


def test_illegal_move_raise_mode_and_bad_actions() -> None:
    env = ConnectFourEnv(illegal_move="raise")
    env.reset(seed=0)
    for _ in range(ROWS):
        env.step(0)
    with pytest.raises(ValueError, match="illegal move"):
        env.step(0)
    assert not any(env.terminations.values())
    for bad in (7, -1, 2.5, "a", None):
        with pytest.raises(ValueError, match="column in 0..6"):
            env.step(bad)
    env.step(np.int64(1))
    with pytest.raises(ValueError, match="illegal_move"):
        ConnectFourEnv(illegal_move="ignore")


def test_parallel_view_turns_and_illegal_move() -> None:
    env = ConnectFourParallelEnv()
    obs, infos = env.reset(seed=0)
    assert infos == {"player_0": {"to_move": True}, "player_1": {"to_move": False}}
    assert obs["player_1"]["action_mask"].sum() == 0
    with pytest.raises(ValueError, match="player_0 is to move"):
        env.step({"player_1": 3})
    obs, rew, term, trunc, infos = env.step({"player_0": 3, "player_1": 5})
    assert env.game.board[ROWS - 1].tolist() == [0, 0, 0, 1, 0, 0, 0]
    assert infos["player_1"]["to_move"] and obs["player_1"]["action_mask"].sum() == COLS
    for _ in range(ROWS - 1):
        env.step({a: 3 for a in env.agents})
    obs, rew, term, trunc, infos = env.step({"player_0": 3})
    assert rew == {"player_0": -1, "player_1": 1} and all(term.values()) and env.agents == []
    assert infos["player_0"]["illegal_move"] and obs["player_1"]["action_mask"].sum() == 0
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"player_0": 0})


# --------------------------------------------------------------------------- properties


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=0, max_size=42))
def test_random_legal_sequences_keep_the_board_consistent(choices: list[int]) -> None:
    game = ConnectFour()
    for k, choice in enumerate(choices):
        if game.done:
            break
        legal = game.legal_moves()
        assert game.legal_mask().tolist() == [int(c in legal) for c in range(COLS)]
        assert legal == [c for c in range(COLS) if game.board[0, c] == 0]
        col = legal[choice % len(legal)]
        winning = game.winning_moves(game.to_move)
        mover = game.to_move
        game.play(col)
        assert game.num_moves == k + 1
        counts = (int((game.board == 1).sum()), int((game.board == 2).sum()))
        assert counts[0] - counts[1] in (0, 1) and sum(counts) == game.num_moves
        for c in range(COLS):
            column = game.board[::-1, c]
            assert int(np.count_nonzero(column)) == game.heights[c]
            assert not np.any(column[: game.heights[c]] == 0)
        assert game.winner == brute_winner(game.board)
        assert (game.winner == mover) == (col in winning)
        assert game.done == (game.winner is not None or game.num_moves == ROWS * COLS)
        rebuilt = ConnectFour.from_board(game.board)
        assert rebuilt.bitboards == game.bitboards and rebuilt.done == game.done
        if game.done:
            assert game.legal_mask().sum() == 0


def _game_after(choices: list[int]) -> ConnectFour:
    """The game after playing, for each choice, the legal column it picks (the list's rest once the game ends)."""
    game = ConnectFour()
    for choice in choices:
        if game.done:
            break
        legal = game.legal_moves()
        game.play(legal[choice % len(legal)])
    return game


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 6), max_size=42), st.integers(0, 2**32 - 1))
def test_a_playout_ends_as_the_game_does_with_the_same_random_columns_and_leaves_it_as_it_was(
        choices: list[int], seed: int) -> None:
    """The bitboard rollout plays, at each ply, the open columns' [int(u * n)] for the generator's next u: the game
    itself, played on by `play` with the same draws, ends with the same returns."""
    game = _game_after(choices)
    before = (game.bitboards[:], game.heights[:], game.to_move, game.num_moves, game.board.copy())
    result = game.playout(random.Random(seed))
    assert (game.bitboards, game.heights, game.to_move, game.num_moves) == before[:4]
    assert (game.board == before[4]).all()
    rng, played = random.Random(seed), game.copy()
    while not played.done:
        legal = played.legal_moves()
        played.play(legal[int(rng.random() * len(legal))])
    assert result == played.returns()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 6), max_size=42))
def test_winning_actions_are_the_movers_moves_that_end_the_game_in_its_win(choices: list[int]) -> None:
    game = _game_after(choices)
    mover, wins = game.current_player(), []
    for col in game.legal_moves():
        after = game.copy()
        after.apply(col)
        if after.winner == mover:
            wins.append(col)
    assert game.winning_actions() == wins


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_env_masks_always_match_legal_moves(seed: int) -> None:
    env = ConnectFourEnv()
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for agent in env.agent_iter(100):
        obs, _, term, trunc, _ = env.last()
        assert env.observation_space(agent).contains(obs)
        if term or trunc:
            assert obs["action_mask"].sum() == 0
            env.step(None)
            continue
        assert obs["action_mask"].tolist() == env.game.legal_mask().tolist()
        other = "player_1" if agent == "player_0" else "player_0"
        assert env.observe(other)["action_mask"].sum() == 0
        me = env.possible_agents.index(agent) + 1
        assert np.array_equal(obs["observation"][..., 0], env.game.board == me)
        assert np.array_equal(obs["observation"][..., 1], env.game.board == 3 - me)
        env.step(random_legal_action(obs["action_mask"], rng))


# --------------------------------------------------------------------------- scripted players


def _planes_for_mover(moves: list[int]) -> dict[str, np.ndarray]:
    game = play_all(moves)
    return {"observation": game.planes(game.to_move), "action_mask": game.legal_mask()}


def test_win_block_player_wins_and_blocks() -> None:
    player = WinBlockPlayer(seed=0)
    assert player(_planes_for_mover([0, 6, 1, 6, 2, 5])) == 3  # player 0 completes the bottom row
    assert player(_planes_for_mover([0, 0, 1, 1, 2])) == 3  # player 1 to move blocks at column 3
    assert player(_planes_for_mover([0, 1, 0, 1, 0, 1])) == 0  # win beats block


def test_win_block_player_avoids_giving_a_win_and_beats_random() -> None:
    board = np.zeros((ROWS, COLS), dtype=np.int8)
    board[ROWS - 1] = [1, 2, 1, 0, 0, 1, 1]
    board[ROWS - 2] = [2, 2, 2, 0, 0, 0, 0]  # player 1 wins at row 1, column 3 once column 3 has a piece
    game = ConnectFour.from_board(board)
    assert game.to_move == 0 and game.winning_moves(0) == [] and game.winning_moves(1) == []
    obs = {"observation": game.planes(0), "action_mask": game.legal_mask()}
    assert {WinBlockPlayer(seed=k)(obs) for k in range(40)} == {0, 1, 2, 4, 5, 6}
    env = ConnectFourEnv()
    results = []
    for k in range(30):
        env.reset(seed=k)
        seats = {env.possible_agents[k % 2]: WinBlockPlayer(seed=k), env.possible_agents[1 - k % 2]: RandomPlayer(seed=k)}
        for agent in env.agent_iter():
            obs, reward, term, trunc, _ = env.last()
            if term or trunc:
                if agent == env.possible_agents[k % 2]:
                    results.append(reward)
                env.step(None)
            else:
                env.step(seats[agent](obs))
    assert np.mean(np.array(results) > 0) >= 0.8


def test_random_player_only_plays_legal_moves() -> None:
    player = RandomPlayer(seed=1)
    obs = _planes_for_mover([2, 2, 2, 2, 2, 2])
    assert {player(obs) for _ in range(200)} == {0, 1, 3, 4, 5, 6}
    with pytest.raises(ValueError, match="no legal action"):
        random_legal_action(np.zeros(COLS, dtype=np.int8), np.random.default_rng(0))
