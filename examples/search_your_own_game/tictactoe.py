"""Tic-tac-toe positions for search, written against PettingZoo's `tictactoe_v3`: what a user adds so that
`ExpertIteration` (and an MCTS player) can search their own game.

The lab's search needs a position it can copy and play forward (`slm_lab_like.tree_search.SearchState`) and, for
expert iteration, a class method `from_observation` that rebuilds the mover's position from what the env shows
it. PettingZoo's observation is `{"observation": int8 (3, 3, 2), "action_mask": int8 (9,)}`: plane 0 holds the
mover's marks and plane 1 the opponent's, and action `a` marks row `a // 3`, column `a % 3`.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


class TicTacToe:
    """A position: `cells[a]` is 0 when empty, else 1 + the player who marked it (player 0 moves first here, the
    mover of the observation it was rebuilt from)."""

    def __init__(self, cells: list[int], to_move: int = 0) -> None:
        self.cells, self.to_move = cells, to_move

    @classmethod
    def from_observation(cls, observation: Any) -> TicTacToe:
        """The mover's position, the mover as player 0."""
        planes = np.asarray(observation["observation"] if isinstance(observation, Mapping) else observation)
        mine, theirs = planes[..., 0].ravel(), planes[..., 1].ravel()
        return cls([1 if m else 2 if t else 0 for m, t in zip(mine, theirs)])

    def copy(self) -> TicTacToe:
        return TicTacToe(self.cells[:], self.to_move)

    def current_player(self) -> int:
        return self.to_move

    def winner(self) -> int | None:
        """The player with three in a line, if any."""
        for a, b, c in LINES:
            if self.cells[a] and self.cells[a] == self.cells[b] == self.cells[c]:
                return self.cells[a] - 1
        return None

    def is_terminal(self) -> bool:
        return self.winner() is not None or all(self.cells)

    def legal_actions(self) -> list[int]:
        return [] if self.is_terminal() else [a for a, v in enumerate(self.cells) if not v]

    def apply(self, action: int) -> None:
        self.cells[action] = self.to_move + 1
        self.to_move = 1 - self.to_move

    def returns(self) -> list[float]:
        winner = self.winner()
        return [0.0, 0.0] if winner is None else [1.0, -1.0] if winner == 0 else [-1.0, 1.0]

    def observation(self) -> dict[str, np.ndarray]:
        """The mover's observation as the env gives it (what the search's net evaluates at a leaf)."""
        cells = np.array(self.cells).reshape(3, 3)
        planes = np.stack([cells == self.to_move + 1, cells == 2 - self.to_move], axis=-1).astype(np.int8)
        mask = np.zeros(9, np.int8)
        mask[self.legal_actions()] = 1
        return {"observation": planes, "action_mask": mask}
