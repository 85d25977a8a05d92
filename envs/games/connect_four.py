"""Connect four (6 rows x 7 columns): a fast two-player zero-sum board game with legal-action masks.

``ConnectFour`` is the pure game (numpy plus Python-int bitboards, no other dependency). ``ConnectFourEnv``
offers it as a PettingZoo turn-based (AEC) env and ``ConnectFourParallelEnv`` as a PettingZoo parallel env.
Observations follow PettingZoo classic: ``{"observation": int8 (6, 7, 2), "action_mask": int8 (7,)}`` where
plane 0 holds the observing player's pieces and plane 1 the opponent's (row 0 is the top row). Actions are
column indices 0-6. Rewards are +1 / -1 to the winner / loser at the end, 0 otherwise (0 and 0 on a draw).

Illegal moves (a full column, or any move after the end): with ``illegal_move="lose"`` (the default) the
mover loses at once (-1, opponent +1, ``infos[mover]["illegal_move"] = True``), as PettingZoo's
TerminateIllegalWrapper does; with ``illegal_move="raise"`` a ``ValueError`` is raised and nothing changes.
An action outside ``range(7)`` always raises ``ValueError``.

``RandomPlayer`` and ``WinBlockPlayer`` are scripted opponents that act from an observation dict.
"""
from __future__ import annotations

import random
from typing import Any, Mapping, Sequence

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

try:
    from pettingzoo import AECEnv, ParallelEnv

    _PETTINGZOO_ERROR: ImportError | None = None
except ImportError as _exc:  # pettingzoo is an optional extra; the pure game works without it
    AECEnv = ParallelEnv = object
    _PETTINGZOO_ERROR = _exc

__all__ = [
    "COLS",
    "ROWS",
    "ConnectFour",
    "ConnectFourEnv",
    "ConnectFourParallelEnv",
    "RandomPlayer",
    "WinBlockPlayer",
    "env",
    "parallel_env",
    "random_legal_action",
]

ROWS = 6
COLS = 7
BITS_PER_COL = ROWS + 1  # bits per column in a bitboard: 6 cells plus one sentinel bit
WIN_SHIFTS = (1, BITS_PER_COL, BITS_PER_COL - 1, BITS_PER_COL + 1)  # vertical, horizontal, both diagonals
_CELL_BITS = np.array([[1 << (c * BITS_PER_COL + ROWS - 1 - r) for c in range(COLS)] for r in range(ROWS)],
                      np.int64)  # each board cell's bit (row 0 on top) in a bitboard
_FULL = sum(((1 << ROWS) - 1) << (c * BITS_PER_COL) for c in range(COLS))


def _is_win(bb: int) -> bool:
    """Whether a bitboard holds four in a line (column-major, 7 bits per column, bottom bit first)."""
    for s in WIN_SHIFTS:
        m = bb & (bb >> s)
        if m & (m >> (2 * s)):
            return True
    return False


class ConnectFour:
    """The game state: bitboards for speed, a numpy board (0 empty, 1 first player, 2 second) for observations."""

    __slots__ = ("bitboards", "heights", "board", "to_move", "num_moves", "winner", "done")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Empty board, player 0 to move."""
        self.bitboards = [0, 0]
        self.heights = [0] * COLS
        self.board = np.zeros((ROWS, COLS), dtype=np.int8)
        self.to_move = 0
        self.num_moves = 0
        self.winner: int | None = None
        self.done = False

    @classmethod
    def from_board(cls, board: np.ndarray, to_move: int | None = None) -> "ConnectFour":
        """A game from a (6, 7) board of 0/1/2 (row 0 on top); ``to_move`` defaults to whoever has fewer pieces.
        Array operations throughout: a search rebuilds every root of every training move this way."""
        board = np.asarray(board)
        ones, twos = board == 1, board == 2
        filled = ones | twos
        if board.shape != (ROWS, COLS) or not (filled | (board == 0)).all():
            raise ValueError(f"board must be a ({ROWS}, {COLS}) array of 0, 1, 2")
        floating = (filled[:-1] & ~filled[1:]).any(axis=0)  # a piece above an empty cell
        if floating.any():
            raise ValueError(f"column {int(np.flatnonzero(floating)[0])} has a floating piece")
        game = cls()
        game.bitboards = [int(_CELL_BITS[ones].sum()), int(_CELL_BITS[twos].sum())]
        game.heights = filled.sum(axis=0).tolist()
        game.board = board.astype(np.int8, copy=True)
        counts = [int(np.count_nonzero(ones)), int(np.count_nonzero(twos))]
        game.num_moves = counts[0] + counts[1]
        game.to_move = (0 if counts[0] <= counts[1] else 1) if to_move is None else int(to_move)
        for p in (0, 1):
            if _is_win(game.bitboards[p]):
                game.winner, game.done = p, True
        game.done = game.done or game.num_moves == ROWS * COLS
        return game

    @classmethod
    def from_planes(cls, planes: np.ndarray) -> "ConnectFour":
        """A game from an observation's (6, 7, 2) planes, with the observer as player 0 and to move."""
        planes = np.asarray(planes)
        board = planes[..., 0].astype(np.int8) + 2 * planes[..., 1].astype(np.int8)
        return cls.from_board(board, to_move=0)

    @classmethod
    def from_observation(cls, observation: Any) -> "ConnectFour":
        """A game from one player's observation (a dict with "observation" planes, or the planes), that player to
        move as player 0: what a search player rebuilds when it sees only observations."""
        return cls.from_planes(observation["observation"] if isinstance(observation, Mapping) else observation)

    @staticmethod
    def observations(games: "Sequence[ConnectFour]") -> tuple[np.ndarray, np.ndarray]:
        """The movers' observations (B, 6, 7, 2) int8 and legal masks (B, 7) bool of many positions at once (the
        search protocol's batched view, for one evaluation of many leaves)."""
        boards = np.stack([g.board for g in games])
        movers = np.array([g.to_move + 1 for g in games], np.int8)[:, None, None]
        planes = np.stack([boards == movers, boards == 3 - movers], axis=-1).astype(np.int8)
        done = np.array([g.done for g in games])
        return planes, (boards[:, 0] == 0) & ~done[:, None]

    @staticmethod
    def mirror(observations: np.ndarray, masks: np.ndarray,
               policies: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The left-right mirror images of a batch of positions (observations (B, 6, 7, 2), legal masks and move
        distributions (B, 7)): the game's symmetry, with which a learner doubles its data."""
        return observations[:, :, ::-1], masks[:, ::-1], policies[:, ::-1]

    def copy(self) -> "ConnectFour":
        """An independent copy of the position (the search protocol's branch), of this position's own class: a
        subclass's overrides hold in every position a search branches to."""
        cls = type(self)
        game = cls.__new__(cls)
        game.bitboards = self.bitboards[:]
        game.heights = self.heights[:]
        game.board = self.board.copy()
        game.to_move, game.num_moves, game.winner, game.done = self.to_move, self.num_moves, self.winner, self.done
        return game

    def current_player(self) -> int:
        """The player to move (0 moves first)."""
        return self.to_move

    def legal_actions(self) -> list[int]:
        """Legal columns (the search protocol's name for `legal_moves`)."""
        return self.legal_moves()

    def is_terminal(self) -> bool:
        """Whether the game is over."""
        return self.done

    def observation(self) -> dict[str, np.ndarray]:
        """The player to move's observation, as the env gives it (the search protocol's optional view for
        evaluators: a trained agent's heads)."""
        return {"observation": self.planes(self.to_move), "action_mask": self.legal_mask()}

    def returns(self) -> list[float]:
        """+1 / -1 to the winner / loser, 0 / 0 on a draw or before the end."""
        if self.winner is None:
            return [0.0, 0.0]
        return [1.0, -1.0] if self.winner == 0 else [-1.0, 1.0]

    def playout(self, rng: random.Random) -> list[float]:
        """Both players' returns after uniformly random moves from here to the end, the position left as it is: the
        search protocol's optional fast rollout, on bitboards alone. A rollout search spends a fifth of its time
        here, so `_is_win`'s four line tests are unrolled (13% faster than the loop)."""
        if self.done:
            return self.returns()
        bitboards, heights, player, moves = self.bitboards[:], self.heights[:], self.to_move, self.num_moves
        open_cols = [c for c in range(COLS) if heights[c] < ROWS]
        n_open, draw, width, top, cells = len(open_cols), rng.random, BITS_PER_COL, ROWS - 1, ROWS * COLS
        while True:
            col = open_cols[int(draw() * n_open)]
            h = heights[col]
            board = bitboards[player] | (1 << (col * width + h))
            bitboards[player] = board
            heights[col] = h + 1
            if h == top:
                open_cols.remove(col)
                n_open -= 1
            moves += 1
            m = board & (board >> 1)  # vertical (the shifts are WIN_SHIFTS and their doubles for 7 bits a column)
            if m & (m >> 2):
                break
            m = board & (board >> 7)  # horizontal
            if m & (m >> 14):
                break
            m = board & (board >> 6)  # one diagonal
            if m & (m >> 12):
                break
            m = board & (board >> 8)  # the other
            if m & (m >> 16):
                break
            if moves == cells:
                return [0.0, 0.0]
            player = 1 - player
        return [1.0, -1.0] if player == 0 else [-1.0, 1.0]

    def winning_actions(self) -> list[int]:
        """The mover's columns that win at once (the search protocol's optional threat test, on bitboards)."""
        return self.winning_moves(self.to_move)

    def is_legal(self, col: int) -> bool:
        """Whether dropping a piece in ``col`` is a legal move now."""
        return not self.done and 0 <= col < COLS and self.heights[col] < ROWS

    def legal_mask(self) -> np.ndarray:
        """int8 mask of legal columns (all zeros once the game is over)."""
        if self.done:
            return np.zeros(COLS, dtype=np.int8)
        return (self.board[0] == 0).astype(np.int8)

    def legal_moves(self) -> list[int]:
        """Legal columns, in order."""
        return [] if self.done else [c for c in range(COLS) if self.heights[c] < ROWS]

    def play(self, col: int) -> None:
        """Drop the mover's piece in ``col``; sets ``winner`` / ``done``; ValueError on an illegal move."""
        if self.done or not 0 <= col < COLS or self.heights[col] == ROWS:  # is_legal inlined: search plays millions
            raise ValueError(f"illegal move: column {col} " + ("(game over)" if self.done else "is full"))
        p = self.to_move
        h = self.heights[col]
        board = self.bitboards[p] | (1 << (col * BITS_PER_COL + h))
        self.bitboards[p] = board
        self.heights[col] = h + 1
        self.board[ROWS - 1 - h, col] = p + 1
        self.num_moves += 1
        if _is_win(board):
            self.winner, self.done = p, True
        elif self.num_moves == ROWS * COLS:
            self.done = True
        self.to_move = 1 - p

    apply = play  # the search protocol's name for `play`

    def wins_with(self, player: int, col: int) -> bool:
        """Whether ``player`` would win at once by dropping a piece in ``col`` (which must not be full)."""
        return _is_win(self.bitboards[player] | (1 << (col * BITS_PER_COL + self.heights[col])))

    def winning_moves(self, player: int) -> list[int]:
        """Columns where ``player`` would win at once."""
        return [c for c in self.legal_moves() if self.wins_with(player, c)]

    def planes(self, player: int) -> np.ndarray:
        """A new int8 (6, 7, 2) array: plane 0 ``player``'s pieces, plane 1 the opponent's."""
        out = np.empty((ROWS, COLS, 2), dtype=np.int8)
        np.equal(self.board, player + 1, out=out[..., 0], casting="unsafe")
        np.equal(self.board, 2 - player, out=out[..., 1], casting="unsafe")
        return out

    def render(self) -> str:
        """Text picture of the board: 'X' first player, 'O' second, '.' empty, column numbers below."""
        rows = ["".join(".XO"[v] for v in row) for row in self.board]
        return "\n".join(rows + ["".join(str(c) for c in range(COLS))])


def random_legal_action(mask: np.ndarray, rng: np.random.Generator) -> int:
    """A uniformly random index where ``mask`` is nonzero."""
    legal = np.flatnonzero(mask)
    if legal.size == 0:
        raise ValueError("no legal action in mask")
    return int(legal[rng.integers(legal.size)])


class RandomPlayer:
    """Scripted opponent: a uniformly random legal move from an observation dict with an ``action_mask``."""

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, observation: Mapping[str, np.ndarray]) -> int:
        """The chosen column."""
        return random_legal_action(observation["action_mask"], self.rng)


class WinBlockPlayer:
    """Scripted opponent with one-step lookahead: win if it can, else block, else a random safe legal move."""

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, observation: Mapping[str, np.ndarray]) -> int:
        """The chosen column: a winning move, a block of the opponent's win, or a move that gives no win away."""
        game = ConnectFour.from_planes(observation["observation"])
        legal = [c for c in game.legal_moves() if observation["action_mask"][c]]
        if not legal:
            raise ValueError("no legal action in mask")
        for player in (0, 1):
            good = [c for c in legal if game.wins_with(player, c)]
            if good:
                return good[int(self.rng.integers(len(good)))]
        safe = [c for c in legal if game.heights[c] + 1 >= ROWS or not _gives_win(game, c)]
        choices = safe or legal
        return choices[int(self.rng.integers(len(choices)))]


def _gives_win(game: ConnectFour, col: int) -> bool:
    """Whether playing ``col`` as player 0 lets player 1 win by playing on top of it."""
    above = 1 << (col * BITS_PER_COL + game.heights[col] + 1)
    return _is_win(game.bitboards[1] | above)


def _require_pettingzoo() -> None:
    """ImportError with the install hint when pettingzoo is missing."""
    if _PETTINGZOO_ERROR is not None:
        raise ImportError(
            "the PettingZoo view of connect four needs pettingzoo: pip install 'slm_lab_like[pettingzoo]'"
        ) from _PETTINGZOO_ERROR


def _spaces() -> tuple[spaces.Dict, spaces.Discrete]:
    """The observation and action space of one player."""
    obs = spaces.Dict(
        {
            "observation": spaces.Box(0, 1, (ROWS, COLS, 2), dtype=np.int8),
            "action_mask": spaces.Box(0, 1, (COLS,), dtype=np.int8),
        }
    )
    return obs, spaces.Discrete(COLS)


def _column(action: Any) -> int:
    """The action as a column index; ValueError when it is not an integer in range(7)."""
    try:
        col = int(action)
    except (TypeError, ValueError):
        raise ValueError(f"connect four action must be a column in 0..{COLS - 1}, got {action!r}") from None
    if col != action or not 0 <= col < COLS:
        raise ValueError(f"connect four action must be a column in 0..{COLS - 1}, got {action!r}")
    return col


_ILLEGAL_MODES = ("lose", "raise")



def _init_views(env: Any, render_mode: str | None, illegal_move: str) -> None:
    """Checked options, players, spaces and a fresh game: what the AEC and parallel views share."""
    if render_mode not in (None, *env.metadata["render_modes"]):
        raise ValueError(f"render_mode must be one of {env.metadata['render_modes']} or None, got {render_mode!r}")
    if illegal_move not in _ILLEGAL_MODES:
        raise ValueError(f"illegal_move must be one of {_ILLEGAL_MODES}, got {illegal_move!r}")
    env.render_mode = render_mode
    env.illegal_move = illegal_move
    env.possible_agents = ["player_0", "player_1"]
    obs_space, act_space = _spaces()
    env.observation_spaces = {a: obs_space for a in env.possible_agents}
    env.action_spaces = {a: act_space for a in env.possible_agents}
    env.game = ConnectFour()

class ConnectFourEnv(AECEnv):
    """Connect four as a PettingZoo AEC env: ``player_0`` moves first, then turns alternate."""

    metadata = {"name": "connect_four_v0", "render_modes": ["ansi", "human"], "is_parallelizable": False}

    def __init__(self, render_mode: str | None = None, illegal_move: str = "lose") -> None:
        _require_pettingzoo()
        super().__init__()
        _init_views(self, render_mode, illegal_move)
        self.np_random, _ = seeding.np_random(None)
        self.reset()

    def observation_space(self, agent: str) -> spaces.Space:
        """The player's observation space (the same object every call)."""
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        """The player's action space (the same object every call)."""
        return self.action_spaces[agent]

    def search_state(self) -> ConnectFour:
        """A copy of the position for search players (slm_lab_like.envs.search)."""
        return self.game.copy()

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        """Fresh observation for ``agent``: its view of the board and its legal-move mask (zeros off turn)."""
        p = self.possible_agents.index(agent)
        on_turn = agent == self.agent_selection and not self.game.done
        mask = self.game.legal_mask() if on_turn else np.zeros(COLS, dtype=np.int8)
        return {"observation": self.game.planes(p), "action_mask": mask}

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        """New game, ``player_0`` to move; ``seed`` seeds ``np_random`` (the game itself has no chance)."""
        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)
        self.game.reset()
        self.agents = self.possible_agents[:]
        self.rewards = {a: 0 for a in self.agents}
        self._cumulative_rewards = {a: 0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos: dict[str, dict] = {a: {} for a in self.agents}
        self.agent_selection = self.agents[0]

    def step(self, action: Any) -> None:
        """Play the selected agent's column; a finished agent's step (action None) removes it."""
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        col = _column(action)
        self._cumulative_rewards[agent] = 0
        self._clear_rewards()
        other = self.possible_agents[1 - self.possible_agents.index(agent)]
        if not self.game.is_legal(col):
            if self.illegal_move == "raise":
                raise ValueError(f"{agent} played an illegal move: column {col} is full")
            self.rewards[agent], self.rewards[other] = -1, 1
            self.infos[agent] = {"illegal_move": True}
            self.game.done = True
            self.terminations = {a: True for a in self.agents}
        else:
            self.game.play(col)
            if self.game.done:
                if self.game.winner is not None:
                    self.rewards[agent], self.rewards[other] = 1, -1
                self.terminations = {a: True for a in self.agents}
        self.agent_selection = other
        self._accumulate_rewards()
        if self.render_mode == "human":
            print(self.render())

    def render(self) -> str | None:
        """The board as text ('ansi' returns it, 'human' prints it); None without a render mode."""
        if self.render_mode is None:
            return None
        return self.game.render()

    def close(self) -> None:
        """Nothing to release; safe to call more than once."""


class ConnectFourParallelEnv(ParallelEnv):
    """Connect four as a PettingZoo parallel env: both players send an action each step, only the mover's counts.

    The player not on turn sees an all-zero ``action_mask`` and ``infos[agent]["to_move"] = False``; its
    action is ignored (any value, or leave it out). The mover's action is required.
    """

    metadata = {"name": "connect_four_parallel_v0", "render_modes": ["ansi", "human"], "is_parallelizable": True}

    def __init__(self, render_mode: str | None = None, illegal_move: str = "lose") -> None:
        _require_pettingzoo()
        _init_views(self, render_mode, illegal_move)
        self.agents: list[str] = []
        self.np_random, _ = seeding.np_random(None)

    def observation_space(self, agent: str) -> spaces.Space:
        """The player's observation space (the same object every call)."""
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        """The player's action space (the same object every call)."""
        return self.action_spaces[agent]

    def search_state(self) -> ConnectFour:
        """A copy of the position for search players (slm_lab_like.envs.search)."""
        return self.game.copy()

    def _observations(self) -> dict[str, dict[str, np.ndarray]]:
        """Fresh observations of both players; only the mover's mask has legal moves."""
        mover = self.game.to_move
        mask = self.game.legal_mask()
        return {
            a: {
                "observation": self.game.planes(p),
                "action_mask": mask if p == mover else np.zeros(COLS, dtype=np.int8),
            }
            for p, a in enumerate(self.possible_agents)
        }

    def _infos(self) -> dict[str, dict[str, Any]]:
        """Per-player info: whose turn it is."""
        mover = self.game.to_move
        return {a: {"to_move": p == mover and not self.game.done} for p, a in enumerate(self.possible_agents)}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """New game, ``player_0`` to move; ``seed`` seeds ``np_random`` (the game itself has no chance)."""
        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)
        self.game.reset()
        self.agents = self.possible_agents[:]
        return self._observations(), self._infos()

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Apply the mover's column; both players get obs, reward, termination, truncation, info."""
        if not self.agents:
            raise RuntimeError("step() called on a finished game; call reset()")
        mover_p = self.game.to_move
        mover = self.possible_agents[mover_p]
        other = self.possible_agents[1 - mover_p]
        if mover not in actions:
            raise ValueError(f"{mover} is to move and must send an action")
        col = _column(actions[mover])
        rewards = {a: 0 for a in self.possible_agents}
        illegal = not self.game.is_legal(col)
        if illegal:
            if self.illegal_move == "raise":
                raise ValueError(f"{mover} played an illegal move: column {col} is full")
            rewards[mover], rewards[other] = -1, 1
            self.game.done = True
        else:
            self.game.play(col)
            if self.game.winner is not None:
                rewards[mover], rewards[other] = 1, -1
        done = self.game.done
        observations, infos = self._observations(), self._infos()
        if illegal:
            infos[mover]["illegal_move"] = True
        terminations = {a: done for a in self.possible_agents}
        truncations = {a: False for a in self.possible_agents}
        if done:
            self.agents = []
        if self.render_mode == "human":
            print(self.render())
        return observations, rewards, terminations, truncations, infos

    def render(self) -> str | None:
        """The board as text ('ansi' returns it, 'human' prints it); None without a render mode."""
        if self.render_mode is None:
            return None
        return self.game.render()

    def close(self) -> None:
        """Nothing to release; safe to call more than once."""


def env(**kwargs: Any) -> ConnectFourEnv:
    """The turn-based (AEC) connect four env, PettingZoo style."""
    return ConnectFourEnv(**kwargs)


def parallel_env(**kwargs: Any) -> ConnectFourParallelEnv:
    """The parallel connect four env, PettingZoo style."""
    return ConnectFourParallelEnv(**kwargs)
