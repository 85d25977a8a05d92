"""Search players: a player that moves by Monte Carlo tree search with random rollouts (UCT, OpenSpiel's `MCTSBot`
with its `RandomRolloutEvaluator`, the opponents of OpenSpiel's evaluator ladder and AlphaZero.jl's MCTS baselines).
The search itself is `slm_lab_like.tree_search.MCTS`, re-exported here.

`MCTSPlayer` makes it a player: in a tournament the referee hands it the game (`bind_game`), so it searches from a
copy of the real position; as a scripted opponent that sees only observations it rebuilds the position with
`game`'s `from_observation` (connect four's by default). It counts its moves; the referee times them.
"""
from __future__ import annotations

from typing import Any

from slm_lab_like.envs.search import search_state
from slm_lab_like.tree_search import DEFAULT_GAME, MCTS, load_game

__all__ = ["MCTS", "MCTSPlayer"]


class MCTSPlayer:
    """A player that moves by `MCTS` with random rollouts: from the bound game's position in a tournament, else from
    the position `game`'s `from_observation` rebuilds; `moves` counts the moves it chose."""

    def __init__(self, seed: int | None = None, simulations: int = 1000, uct_c: float = 2.0, rollouts: int = 1,
                 solve: bool = True, game: str = DEFAULT_GAME) -> None:
        self.mcts = MCTS(simulations, uct_c, rollouts, solve, seed)
        self.from_observation = load_game(game)
        self.env: Any = None
        self.moves = 0

    def bind_game(self, env: Any) -> None:
        """Search from copies of `env`'s position from now on (the referee's game)."""
        self.env = env

    def __call__(self, observation: Any) -> int:
        """The chosen action for the player to move."""
        state = search_state(self.env) if self.env is not None else self.from_observation(observation)
        self.moves += 1
        return self.mcts.search(state)
