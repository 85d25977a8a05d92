"""Many connect four games in one lab env, stepped as numpy arrays: self-play data without per-game Python.

``ConnectFourBatchEnv`` is a LabEnv (no PettingZoo view) whose body slots are the seats of ``n_slots // 2``
independent games: slot ``2k + p`` is seat ``p`` (``p = 0`` moves first) of game ``k``. Each game resets
itself when it ends, so every step is one move in every game. Observations, masks, rewards and the turn
bookkeeping are exactly those of the lab's turn-based PettingZoo adapter over ``ConnectFourEnv`` (the AEC
view): the mover's observation (``(6, 7, 2)`` int8, plane 0 its own pieces, plane 1 the opponent's), its
legal-move mask (all False off turn), ``acting`` = the mover of every game, and a seat's transition
completes when its next turn comes or its game ends (+1 / -1 to the winner / loser, 0 / 0 on a draw).
Illegal moves follow ``illegal_move`` as in ``ConnectFourEnv``; ``max_t`` truncates a game after that
many moves.
"""
from __future__ import annotations

import math

import numpy as np
from gymnasium import spaces

from slm_lab_like.envs.base import Clock, LabEnv, SlotBlock
from slm_lab_like.envs.games.connect_four import BITS_PER_COL, COLS, ROWS, WIN_SHIFTS

_SHIFTS = tuple(np.uint64(s) for s in WIN_SHIFTS)
_ILLEGAL_MODES = ("lose", "raise")


def is_win(bitboards: np.ndarray) -> np.ndarray:
    """Which uint64 bitboards (column-major, 7 bits per column) hold four in a line."""
    out = np.zeros(bitboards.shape, dtype=bool)
    for s in _SHIFTS:
        m = bitboards & (bitboards >> s)
        out |= (m & (m >> (s + s))) != 0
    return out


class ConnectFourBatchEnv(LabEnv):
    """``n_slots // 2`` connect four games, one body slot per seat, every game auto-reset in place."""

    GAME = "connect_four"  # the one game its batch plays: where its agents meet others (tournaments, exploit)

    def __init__(self, name: str, n_slots: int, clock: Clock, max_t: int | None = None,
                 illegal_move: str = "lose") -> None:
        if n_slots < 2 or n_slots % 2:
            raise ValueError(f'env "{name}" hosts games of two seats: place an even number of bodies '
                             f"(two per game), got {n_slots}")
        if illegal_move not in _ILLEGAL_MODES:
            raise ValueError(f"illegal_move must be one of {_ILLEGAL_MODES}, got {illegal_move!r}")
        obs_space = spaces.Box(0, 1, (ROWS, COLS, 2), dtype=np.int8)
        block = SlotBlock(0, n_slots, obs_space, spaces.Discrete(COLS), where=f'env "{name}"')
        block.add_action_masks(COLS)
        block.add_turns()
        super().__init__(name, clock, [block])
        self.block = block
        self.illegal_move = illegal_move
        self.max_t = max_t or math.inf
        k = self.n_games = n_slots // 2
        self.games = np.arange(k)
        self.board = np.zeros((k, ROWS, COLS), dtype=np.int8)
        self.heights = np.zeros((k, COLS), dtype=np.int64)
        self.bitboards = np.zeros((k, 2), dtype=np.uint64)
        self.to_move = np.zeros(k, dtype=np.int64)
        self.moves = np.zeros(k, dtype=np.int64)
        self.pending = np.zeros(n_slots, dtype=bool)
        self.pending_action = np.zeros(n_slots, dtype=np.int64)
        self.length = np.zeros(n_slots, dtype=np.int64)
        self.frames = np.zeros(n_slots, dtype=np.int64)
        self.seat = np.tile([0, 1], k)

    @property
    def slot_frames(self) -> list[int]:
        """Each slot's own frames so far (its moves)."""
        return self.frames.tolist()

    def restore_slot_frames(self, frames: list[int]) -> None:
        self.frames[:] = frames

    def reset(self, seed: int | None = None) -> None:
        """Every game starts afresh (the game has no chance, so `seed` changes nothing)."""
        self.pending[:] = False
        self.length[:] = 0
        self._new_games(self.games, self.parity)

    def _new_games(self, games: np.ndarray, q: int) -> None:
        """Empty boards for `games`, seat 0 to move; their slots' obs, masks and acting flags in buffer `q`."""
        blk = self.block
        self.board[games] = 0
        self.heights[games] = 0
        self.bitboards[games] = 0
        self.to_move[games] = 0
        self.moves[games] = 0
        both = np.concatenate([2 * games, 2 * games + 1])
        blk.obs[q][both] = 0
        (action_mask, _), (acting, _) = blk.mask_buffers(), blk.turn_flags()
        action_mask[q][2 * games] = True
        action_mask[q][2 * games + 1] = False
        acting[q][2 * games] = True
        acting[q][2 * games + 1] = False

    def _planes(self, games: np.ndarray, seats: np.ndarray) -> np.ndarray:
        """(n, 6, 7, 2) int8 views of `games` from `seats`: plane 0 the seat's pieces, plane 1 the opponent's."""
        board = self.board[games]
        seat = seats[:, None, None]
        return np.stack([board == seat + 1, board == 2 - seat], axis=-1).astype(np.int8)

    def step(self) -> None:
        blk, p = self.block, self.parity
        q = 1 - p
        g = self.games
        mover = self.to_move
        ms, os = 2 * g + mover, 2 * g + 1 - mover
        cols = blk.action[ms].astype(np.int64)
        if ((cols < 0) | (cols >= COLS)).any():
            raise ValueError(f"connect four actions must be columns in 0..{COLS - 1}, got {blk.action[ms].tolist()}")
        h = self.heights[g, cols]
        illegal = h >= ROWS
        if illegal.any() and self.illegal_move == "raise":
            raise ValueError(f"illegal move: column {int(cols[illegal][0])} is full in game {int(g[illegal][0])}")
        self.pending_action[ms] = cols
        self.pending[ms] = True
        self.length[ms] += 1
        self.frames[ms] += 1
        legal = ~illegal
        gl, cl, hl, pl = g[legal], cols[legal], h[legal], mover[legal]
        self.board[gl, ROWS - 1 - hl, cl] = (pl + 1).astype(np.int8)
        self.heights[gl, cl] = hl + 1
        self.bitboards[gl, pl] |= np.uint64(1) << (cl * BITS_PER_COL + hl).astype(np.uint64)
        self.moves += 1
        win = legal & is_win(self.bitboards[g, mover])
        term = illegal | win | (legal & (self.moves == ROWS * COLS))
        trunc = ~term & (self.moves >= self.max_t)
        over = term | trunc

        (action_mask, _), (acting, completed) = blk.mask_buffers(), blk.turn_flags()
        completed[:] = False
        blk.terminated[:] = False
        blk.truncated[:] = False
        blk.reward[:] = 0.0
        live = ~over
        # games going on: the mover's decision is carried forward, the other seat's turn has come
        lm, lo, lg = ms[live], os[live], g[live]
        blk.obs[q][lm] = blk.obs[p][lm]
        action_mask[q][lm] = action_mask[p][lm]
        blk.obs[q][lo] = self._planes(lg, self.seat[lo])
        action_mask[q][lo] = self.board[lg, 0] == 0
        acting[q][lm] = False
        acting[q][lo] = True
        done_pending = lo[self.pending[lo]]
        self._complete(done_pending)
        self.to_move[live] = 1 - mover[live]
        if over.any():
            self._end_games(g[over], ms[over], os[over], win[over], illegal[over], trunc[over], q)
        self.parity = q
        self.clock.frame += len(g)

    def _complete(self, slots: np.ndarray) -> None:
        """Mark `slots`' transitions whole in this step's buffers: their pending action back in `action`."""
        blk = self.block
        blk.turn_flags()[1][slots] = True
        blk.action[slots] = self.pending_action[slots]
        self.pending[slots] = False

    def _end_games(self, games: np.ndarray, ms: np.ndarray, os: np.ndarray, win: np.ndarray, illegal: np.ndarray,
                   trunc: np.ndarray, q: int) -> None:
        """Final obs, rewards and flags of both seats of every ended game; the episode ends; new games start."""
        blk = self.block
        sign = win.astype(np.float32) - illegal.astype(np.float32)
        blk.reward[ms] = sign
        blk.reward[os] = -sign
        both = np.concatenate([ms, os])
        blk.final_obs[both] = self._planes(np.concatenate([games, games]), self.seat[both])
        final_action_mask = blk.mask_buffers()[1]
        final_action_mask[both] = False
        cut_games = games[trunc]
        if len(cut_games):  # a game cut by max_t is not over: the seat to move keeps its legal moves
            final_action_mask[os[trunc]] = self.board[cut_games, 0] == 0
        cut = np.concatenate([trunc, trunc])
        blk.terminated[both] = ~cut
        blk.truncated[both] = cut
        self._complete(both[self.pending[both]])
        order = np.sort(both)
        self.ended.extend(order, blk.reward[order], self.length[order], blk.truncated[order], self.frames[order])
        self.length[both] = 0
        self._new_games(games, q)

    def close(self) -> None:
        """Nothing to release; safe to call more than once."""
