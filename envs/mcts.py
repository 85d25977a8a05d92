"""Monte Carlo tree search with random rollouts (UCT), the field's yardstick for game-playing agents.

`MCTS` follows OpenSpiel's `MCTSBot` with its `RandomRolloutEvaluator`, the opponents of OpenSpiel's evaluator
ladder and AlphaZero.jl's MCTS baselines: each of `simulations` simulations walks down the tree by UCT
(value + uct_c * sqrt(ln N_parent / N_child), an unvisited child first), expands a node on its second visit, plays
`rollouts` uniformly random games to the end from there and backs every player's mean return up the path. With
`solve` (the default, as OpenSpiel's evaluator) proven results back up too (MCTS-Solver): a node whose mover has a
winning child, or whose children are all proven, is proven, and the search stops once the root is. The move played
is the root's child that is best proven, then most visited, then of the highest total return.

With an `evaluator` (a position's prior over its legal actions and every player's value, e.g. a trained agent's
policy and value heads) it searches as AlphaZero does (PUCT): a leaf is expanded on its first visit with the
evaluator's priors, its value backs up instead of a rollout, and a child's score is Q + c_puct * P * sqrt(N_parent) /
(1 + N_child).

`MCTSPlayer` makes it a player: in a tournament the referee hands it the game (`bind_game`), so it searches from a
copy of the real position; as a scripted opponent that sees only observations it rebuilds the position with
`game`'s `from_observation` (connect four's by default). It counts its moves; the referee times them.
"""
from __future__ import annotations

import importlib
import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from slm_lab_like.envs.search import SearchState, search_state

__all__ = ["MCTS", "MCTSPlayer"]

DEFAULT_GAME = "slm_lab_like.envs.games.connect_four:ConnectFour"
Evaluator = Callable[[SearchState], tuple[Mapping[int, float], Sequence[float]]]  # priors of legal actions, values


@dataclass(eq=False)
class Node:
    """One tree node: the action that led here, the player who chose it, visits, that player's summed return, a
    proven result (every player's return) or None, and the children once expanded."""

    action: int
    player: int
    prior: float = 1.0
    visits: int = 0
    total: float = 0.0
    outcome: list[float] | None = None
    children: list[Node] = field(default_factory=list)

    def uct(self, log_parent: float, uct_c: float) -> float:
        """The chooser's score for this child: a proven result as it is, an unvisited child first, else UCT."""
        if self.outcome is not None:
            return self.outcome[self.player]
        if self.visits == 0:
            return math.inf
        return self.total / self.visits + uct_c * math.sqrt(log_parent / self.visits)

    def puct(self, sqrt_parent: float, c_puct: float) -> float:
        """The chooser's score for this child under PUCT: a proven result as it is, else its mean return (0 before a
        visit) plus its prior's share of the exploration."""
        if self.outcome is not None:
            return self.outcome[self.player]
        mean = self.total / self.visits if self.visits else 0.0
        return mean + c_puct * self.prior * sqrt_parent / (1 + self.visits)

    def rank(self) -> tuple[float, int, float]:
        """The final choice's order: proven result, then visits, then total return."""
        return (self.outcome[self.player] if self.outcome is not None else 0.0), self.visits, self.total


class MCTS:
    """UCT search over a `SearchState` (PUCT with an `evaluator`); `search(state)` returns the chosen action."""

    def __init__(self, simulations: int = 1000, uct_c: float = 2.0, rollouts: int = 1, solve: bool = True,
                 seed: int | None = None, max_return: float = 1.0, evaluator: Evaluator | None = None,
                 c_puct: float = 1.5) -> None:
        if simulations < 1 or rollouts < 1:
            raise ValueError(f"MCTS needs simulations >= 1 and rollouts >= 1, got {simulations} and {rollouts}")
        self.simulations, self.uct_c, self.rollouts, self.solve = simulations, uct_c, rollouts, solve
        self.evaluator, self.c_puct = evaluator, c_puct
        self.rng = random.Random(seed)
        self.max_return = max_return  # a player's return for a win: a child proven to reach it proves its parent

    def search(self, state: SearchState) -> int:
        """The action to play from `state` (left as it is) after the simulations."""
        legal = state.legal_actions()
        if not legal:
            raise ValueError("search from a position with no legal action")
        if len(legal) == 1:
            return legal[0]
        root = Node(-1, -1)
        for _ in range(self.simulations):
            self._simulate(root, state.copy())
            if root.outcome is not None:
                break
        return max(root.children, key=Node.rank).action

    def _simulate(self, root: Node, state: SearchState) -> None:
        """One simulation: down the tree, one expansion (UCT: on a node's second visit; PUCT: on its first, with the
        evaluator's priors), a rollout or the evaluator's values (or the proven end), the returns back up."""
        path = [root]
        node = root
        while not state.is_terminal() and (node.children or (self.evaluator is None and node.visits > 0)):
            if not node.children:
                self._expand(node, state)
            node = self._select(node)
            state.apply(node.action)
            path.append(node)
        if state.is_terminal():
            returns = list(state.returns())
            node.outcome = returns
            solved = self.solve
        elif self.evaluator is not None:
            priors, values = self.evaluator(state)
            self._expand(node, state, priors)
            returns, solved = list(values), False
        else:
            returns = self._rollouts(state)
            solved = False
        for node in reversed(path):
            node.visits += 1
            if node.player >= 0:
                node.total += returns[node.player]
            if solved and node.children:
                solved = self._prove(node)

    def _select(self, node: Node) -> Node:
        """The child to walk down to: the best by UCT, or by PUCT with an evaluator."""
        if self.evaluator is None:
            log_parent = math.log(node.visits)
            return max(node.children, key=lambda c: c.uct(log_parent, self.uct_c))
        sqrt_parent = math.sqrt(max(1, node.visits))
        return max(node.children, key=lambda c: c.puct(sqrt_parent, self.c_puct))

    def _expand(self, node: Node, state: SearchState, priors: Mapping[int, float] | None = None) -> None:
        """Children for every legal action (with their `priors`), in random order (so ties break at random)."""
        player = state.current_player()
        actions = state.legal_actions()
        self.rng.shuffle(actions)
        node.children = [Node(a, player, 1.0 if priors is None else float(priors.get(a, 0.0))) for a in actions]

    def _prove(self, node: Node) -> bool:
        """Prove `node` when its mover has a proven child that wins outright, or every child is proven (it takes the
        best); whether it is proven, so that proving goes on up the path."""
        player = node.children[0].player
        best: list[float] | None = None
        all_proven = True
        for child in node.children:
            if child.outcome is None:
                all_proven = False
            elif best is None or child.outcome[player] > best[player]:
                best = child.outcome
        if best is not None and (all_proven or best[player] >= self.max_return):
            node.outcome = best
            return True
        return False

    def _rollouts(self, state: SearchState) -> list[float]:
        """Every player's mean return over `rollouts` uniformly random games from `state` (the state's own `playout`
        where it has one, e.g. connect four's on bitboards)."""
        total: list[float] | None = None
        playout = getattr(state, "playout", None)
        for k in range(self.rollouts):
            if callable(playout):
                returns = playout(self.rng)
            else:
                game = state.copy() if k < self.rollouts - 1 else state
                while not game.is_terminal():
                    game.apply(self.rng.choice(game.legal_actions()))
                returns = game.returns()
            total = list(returns) if total is None else [t + r for t, r in zip(total, returns)]
        assert total is not None
        return [t / self.rollouts for t in total]


def load_game(path: str) -> Callable[[Any], SearchState]:
    """The `from_observation` of the game class named by `module:Class`; ValueError in one line otherwise."""
    module_name, _, attr = path.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as e:
        raise ValueError(f'cannot load game "{path}": {e}') from None
    make = getattr(cls, "from_observation", None)
    if not callable(make):
        raise ValueError(f'game "{path}" has no from_observation(observation) to rebuild a position from')
    return make


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
