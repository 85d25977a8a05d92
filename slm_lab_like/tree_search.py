"""Monte Carlo tree search over any turn-based game that can copy its positions: UCT with random rollouts (the
field's yardstick for game-playing agents) and PUCT over a learned evaluator (AlphaZero's search), one position or
many at once.

`SearchState` is all search needs of a game. `MCTS` follows OpenSpiel's `MCTSBot` with its `RandomRolloutEvaluator`:
each of `simulations` simulations walks down the tree by UCT (value + uct_c * sqrt(ln N_parent / N_child), an
unvisited child first), expands a node on its second visit, plays `rollouts` uniformly random games to the end from
there and backs every player's mean return up the path. With `solve` (the default, as OpenSpiel's evaluator) proven
results back up too (MCTS-Solver): a node whose mover has a winning child, or whose children are all proven, is
proven, and the search stops once the root is. The move played is the root's child that is best proven, then most
visited, then of the highest total return.

With an `evaluator` (a position's priors over its legal actions and every player's value, e.g. a trained agent's
policy and value heads) it searches as AlphaZero does (PUCT): a leaf is expanded on its first visit with the
evaluator's priors, its value backs up instead of a rollout, and a child's score is Q + c_puct * P * sqrt(N_parent) /
(1 + N_child). `search_many` runs PUCT from many positions in lockstep, every tree's leaf of a simulation evaluated
in one call (one forward pass of a net): what expert iteration (`slm_lab_like.agents.expert_iteration`) trains with.

A bottom layer of the lab: it knows games only through the protocol, so agents and envs both use it. Search players
(`slm_lab_like.envs.mcts`) and the positions of PettingZoo envs (`slm_lab_like.envs.search`) are built on it.
"""
from __future__ import annotations

import gc
import math
import random
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from slm_lab_like.import_path import import_object

__all__ = ["MCTS", "Node", "SearchState", "choice", "game_class", "load_game", "mix_noise", "observations", "paused_gc",
           "visit_policy"]


@runtime_checkable
class SearchState(Protocol):
    """A position of a turn-based game that can be copied and played forward in place. Optional, where a game has
    them: `playout(rng)`, every player's returns after uniformly random moves to the end, the position left as it is
    (rollouts' fast path); `winning_actions()`, the mover's actions that win at once (threat tests' fast path);
    `observation()`, the mover's observation as the env gives it; and on the class,
    `observations(states)`, many positions' observations and legal-action masks as two arrays (one evaluation of
    many leaves)."""

    def copy(self) -> SearchState:
        """An independent copy: playing on it leaves this one as it is."""
        ...

    def current_player(self) -> int:
        """The index (in the game's player order) of the player to move."""
        ...

    def legal_actions(self) -> list[int]:
        """The actions the player to move may take (empty once the game is over)."""
        ...

    def apply(self, action: int) -> None:
        """Play `action` for the player to move."""
        ...

    def is_terminal(self) -> bool:
        """Whether the game is over."""
        ...

    def returns(self) -> Sequence[float]:
        """Every player's total reward so far, in player order (its result once the game is over)."""
        ...


DEFAULT_GAME = "slm_lab_like.envs.games.connect_four:ConnectFour"
Priors = Mapping[int, float] | Sequence[float]  # each legal action's prior, looked up by the action
Evaluation = tuple[Priors, Sequence[float]]  # priors, every player's value
Evaluator = Callable[[SearchState], Evaluation]
BatchEvaluator = Callable[[list[SearchState]], list[Evaluation]]  # many positions in one call (one net forward)


class Node:
    """One tree node: the action that led here, the player who chose it, its prior, visits, that player's summed
    return, a proven result (every player's return) or None, and the children once expanded. A plain class with
    slots: searches build hundreds of thousands of them."""

    __slots__ = ("action", "player", "prior", "visits", "total", "outcome", "children")

    def __init__(self, action: int, player: int, prior: float = 1.0) -> None:
        self.action, self.player, self.prior = action, player, prior
        self.visits = 0
        self.total = 0.0
        self.outcome: list[float] | None = None
        self.children: list[Node] = []

    def uct(self, log_parent: float, uct_c: float) -> float:
        """The chooser's score for this child: a proven result as it is, an unvisited child first, else UCT."""
        if self.outcome is not None:
            return self.outcome[self.player]
        if self.visits == 0:
            return math.inf
        return self.total / self.visits + uct_c * math.sqrt(log_parent / self.visits)

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
        with paused_gc():
            for _ in range(self.simulations):
                self._simulate(root, state.copy())
                if root.outcome is not None:
                    break
        return choice(root)

    def search_many(self, states: Sequence[SearchState], evaluate: BatchEvaluator,
                    noise: tuple[float, float] | None = None, rng: np.random.Generator | None = None) -> list[Node]:
        """PUCT from every position of `states` at once (left as they are): each simulation walks down every tree that
        is not proven, and their leaves are evaluated in one call of `evaluate`. With `noise` (alpha, fraction) each
        root's priors are mixed with Dirichlet(alpha) noise drawn from `rng` (AlphaZero's exploration in self-play).
        Returns the roots; `choice`, `visit_policy` read them."""
        roots = [Node(-1, -1) for _ in states]
        with paused_gc():
            self._simulate_many(roots, states, evaluate, noise, rng)
        return roots

    def _simulate_many(self, roots: list[Node], states: Sequence[SearchState], evaluate: BatchEvaluator,
                       noise: tuple[float, float] | None, rng: np.random.Generator | None) -> None:
        """`search_many`'s simulations: the walks, one batched evaluation, the backups; the roots' noise once
        expanded."""
        for sim in range(self.simulations):
            pending: list[tuple[list[Node], SearchState]] = []
            for root, start in zip(roots, states):
                if root.outcome is None and not start.is_terminal():
                    self._descend(root, start.copy(), pending)
            if pending:
                for (path, state), (priors, values) in zip(pending, evaluate([s for _, s in pending])):
                    self._expand(path[-1], state, priors)
                    self._backup(path, list(values), False)
            if sim == 0 and noise is not None:
                noise_rng = rng or np.random.default_rng()
                for root in roots:
                    mix_noise(root, noise, noise_rng)

    def _descend(self, root: Node, state: SearchState, pending: list[tuple[list[Node], SearchState]]) -> None:
        """One walk of a batched simulation: down the tree by PUCT; a terminal end backs up at once, a leaf waits in
        `pending` for the batch's evaluation."""
        path, node = [root], root
        while node.children and not state.is_terminal():
            node = self._select(node, True)
            state.apply(node.action)
            path.append(node)
        if state.is_terminal():
            node.outcome = list(state.returns())
            self._backup(path, node.outcome, self.solve)
        else:
            pending.append((path, state))

    def _backup(self, path: list[Node], returns: list[float], solved: bool) -> None:
        """Every node of `path` takes a visit and its chooser's return; a proven end proves up the path while it can."""
        for node in reversed(path):
            node.visits += 1
            if node.player >= 0:
                node.total += returns[node.player]
            if solved and node.children:
                solved = self._prove(node)

    def _simulate(self, root: Node, state: SearchState) -> None:
        """One simulation: down the tree, one expansion (UCT: on a node's second visit; PUCT: on its first, with the
        evaluator's priors), a rollout or the evaluator's values (or the proven end), the returns back up."""
        path = [root]
        node = root
        while not state.is_terminal() and (node.children or (self.evaluator is None and node.visits > 0)):
            if not node.children:
                self._expand(node, state)
            node = self._select(node, self.evaluator is not None)
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
            returns = self.rollouts_from(state, consume=True)
            solved = False
        self._backup(path, returns, solved)

    def _select(self, node: Node, puct: bool) -> Node:
        """The child to walk down to: the best by UCT, or by PUCT (`puct`: an evaluator's priors)."""
        if not puct:
            log_parent = math.log(node.visits)
            return max(node.children, key=lambda c: c.uct(log_parent, self.uct_c))
        scale = self.c_puct * math.sqrt(max(1, node.visits))
        best, best_score = node.children[0], -math.inf
        for child in node.children:  # a proven result as it is, else mean return (0 unvisited) + the prior's share
            if child.outcome is not None:
                score = child.outcome[child.player]
            else:
                visits = child.visits
                score = (child.total / visits if visits else 0.0) + scale * child.prior / (1 + visits)
            if score > best_score:
                best, best_score = child, score
        return best

    def _expand(self, node: Node, state: SearchState, priors: Priors | None = None) -> None:
        """Children for every legal action: with `priors`, theirs; without, in random order (so UCT's ties break at
        random)."""
        player = state.current_player()
        actions = state.legal_actions()
        if priors is not None:
            node.children = [Node(a, player, float(priors[a])) for a in actions]
            return
        self.rng.shuffle(actions)
        node.children = [Node(a, player) for a in actions]

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

    def rollouts_from(self, state: SearchState, consume: bool = False) -> list[float]:
        """Every player's mean return over `rollouts` uniformly random games from `state` (the state's own `playout`
        where it has one, e.g. connect four's on bitboards), `state` left as it is; `consume`: the last game may be
        played on `state` itself (one copy fewer, for a caller that is done with it)."""
        playout = getattr(state, "playout", None)
        if self.rollouts == 1 and callable(playout):  # the usual case, once per leaf: no sums to keep
            return list(playout(self.rng))
        total: list[float] | None = None
        for k in range(self.rollouts):
            if callable(playout):
                returns = playout(self.rng)
            else:
                game = state if consume and k == self.rollouts - 1 else state.copy()
                while not game.is_terminal():
                    game.apply(self.rng.choice(game.legal_actions()))
                returns = game.returns()
            total = list(returns) if total is None else [t + r for t, r in zip(total, returns)]
        assert total is not None
        return [t / self.rollouts for t in total]


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector off for a while: a search allocates tens of thousands of nodes, no cycles among
    them, and each of the collector's passes over the growing tree would cost more than the search's own work."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def mix_noise(root: Node, noise: tuple[float, float], rng: np.random.Generator) -> None:
    """Mix an expanded root's priors with Dirichlet(alpha) noise: prior <- (1 - fraction) * prior + fraction * noise."""
    if not root.children:
        return
    alpha, fraction = noise
    for child, eta in zip(root.children, rng.dirichlet([alpha] * len(root.children))):
        child.prior = (1.0 - fraction) * child.prior + fraction * float(eta)


def choice(root: Node) -> int:
    """The action a searched root plays: its best proven child, then the most visited (`MCTS.search`'s rule)."""
    return max(root.children, key=Node.rank).action


def visit_policy(root: Node, n_actions: int) -> np.ndarray:
    """A searched root's move distribution over `n_actions`: its visit counts, normalised; a proven root puts all of
    it on the proven move (the search stopped early, and its visits would understate the proof)."""
    out = np.zeros(n_actions, np.float32)
    if root.outcome is not None:
        out[choice(root)] = 1.0
        return out
    for child in root.children:
        out[child.action] = child.visits
    total = out.sum()
    return out / total if total > 0 else out


def root_value(root: Node) -> float:
    """A searched root's value for its mover: its proven result, else the mean return of its children's visits (NaN
    when no child was visited)."""
    if not root.children:
        return math.nan
    mover = root.children[0].player
    if root.outcome is not None:
        return float(root.outcome[mover])
    visits = sum(child.visits for child in root.children)
    return sum(child.total for child in root.children) / visits if visits else math.nan


def game_class(path: str) -> type:
    """The game class named by `module:Class`; ValueError in one line otherwise (with import_object's hints)."""
    try:
        return import_object(path)
    except ValueError as e:
        raise ValueError(f'cannot load game "{path}": {e}') from None


def load_game(path: str) -> Callable[[Any], SearchState]:
    """The `from_observation` of the game class named by `module:Class`; ValueError in one line otherwise."""
    make = getattr(game_class(path), "from_observation", None)
    if not callable(make):
        raise ValueError(f'game "{path}" has no from_observation(observation) to rebuild a position from')
    return make


def observations(states: Sequence[SearchState], n_actions: int) -> tuple[np.ndarray, np.ndarray]:
    """The movers' observations (B, ...) and legal-action masks (B, n_actions) of positions of one game: the game's
    own `observations(states)` where its class has one, else each state's `observation()` (a PettingZoo classic
    dict's "observation" and "action_mask", or an array and the legal actions)."""
    batched = getattr(type(states[0]), "observations", None)
    if callable(batched):
        return batched(states)
    obs, masks = [], np.zeros((len(states), n_actions), bool)
    for i, state in enumerate(states):
        view = state.observation()  # type: ignore[attr-defined]
        obs.append(view["observation"] if isinstance(view, dict) else view)
        masks[i, state.legal_actions()] = True
    return np.stack(obs), masks
