"""Expert iteration (Anthony et al. 2017), AlphaZero's training loop: search plays, the net learns what search found.

Every move of a learning body is chosen by PUCT search (`slm_lab_like.tree_search.MCTS.search_many`) over the agent's own policy
and value heads, from the position its observation shows (the game's `from_observation`); the searches of all the
bodies that move in a step run in lockstep, their leaves evaluated in one forward pass. Each position is kept with
the search's move distribution (its visit counts, or the completed-Q policy) and, once the body's game is over, the
return that followed it (the game's result for a two-player game); positions inside the search trees whose move the
search proved may join them (`proven_positions`). The net learns both from a replay of recent positions:
cross-entropy to the search's distribution and squared error to the result. Its raw policy, played greedily, is what evaluation and
tournaments see; search at play time stays a player's option (a checkpoint player's `search`).

For two-player zero-sum turn-based games of Discrete actions with legal-action masks, whose observations rebuild
the position (connect four, the built-in game's and PettingZoo's `connect_four_v3`): the value is the mover's.
"""
# No `from __future__ import annotations` here: the Config dataclass is built by the spec loader elsewhere, and
# string annotations would then resolve only in this module's namespace.

import copy
import math
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Literal

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from slm_lab_like.agents.base import AgentContext, Algorithm, Transition, discrete_n, space_text
from slm_lab_like.agents.common import group_signatures, obs_shape, to_tensor, zero_based_problem
from slm_lab_like.agents.config import resolve_component
from slm_lab_like.agents.explore import masked
from slm_lab_like.agents.losses import nstep_returns
from slm_lab_like.agents.net.base import Optim, resolve_device
from slm_lab_like.agents.policy import ActorCritic
from slm_lab_like.agents.registry import NETS
from slm_lab_like.tree_search import (DEFAULT_GAME, MCTS, Evaluation, Node, SearchState, choice, game_class,
                                      load_game, observations, paused_gc, root_value, visit_policy)


@dataclass
class ExpertIterationConfig:
    """Expert iteration's hyperparameters.

    `game`: the game class (`module:Class`) whose `from_observation` rebuilds a position from a mover's observation.
    `simulations`, `c_puct`: each move's PUCT search; `dirichlet_alpha`, `dirichlet_fraction`: the noise mixed into
    the root's priors. `sample_moves`: a body's first moves of each game are drawn in proportion to the search's
    visits (openings differ), later ones are the search's choice. `gamma`: the discount of the value target.
    `replay_size` positions are kept; every `train_every` new positions (after `learning_starts`) the net takes
    `sample_reuse * new / batch_size` steps on minibatches of `batch_size`. `mirror`: half of each
    minibatch is replaced by its mirror image, the game's `mirror(observations, masks, policies)` (a left-right
    symmetric game's augmentation, as connect four's). `rollout_weight` w: a leaf's value is (1 - w) times the net's
    plus w times the returns of a uniformly random game from it (AlphaGo's mixed evaluation; ExIt's first experts
    searched with rollouts): a search that plays well before the value head has learned anything.
    `policy_target`: what the policy learns at each searched position: "visits", the root's visit counts raised to
    1 / `target_temperature`, normalised (below 1: sharper, nearer the move the search chose); "completed_q", Gumbel
    AlphaZero's improved policy (`completed_q_policy`), which improves on the net's own policy even with few
    simulations, where visit counts mostly echo the priors. `proven_positions` k: up to k positions inside each
    search's tree whose best move the search proved (`proven_positions`: the mover's win, or its one move not proven
    to lose) join the replay beside the game's own, with that move as the policy target (and a win's value, 1): the
    tactics the search sees, which self-play's own positions rarely hold, as exact targets for the raw policy.
    `random_moves` k: each game a body draws n uniformly from 0..k and plays its first n moves uniformly at random
    among the legal ones (each still searched, so the position keeps its search's target): self-play then reaches the
    untidy positions that other players (and random openings) lead to, which its own play never would.
    `random_move_rate` p: each of a body's other moves is uniformly random with probability p (searched all the
    same): the threats a careless opponent leaves open and makes arise all game long, not only in the opening.
    `search_value_weight` w: each position's value target is (1 - w) times the game's result plus w times the value
    its search found for the mover (the root's mean return; a proven root's result): the result alone (0, AlphaZero's
    z) is one noisy game's, the more so after sampled and random moves; 0.5 is the average of z and q that Oracle's
    connect-four study found to learn faster than either.
    `learner_thread`: the net learns on a thread of its own while the search plays on (AlphaZero's actors and learner,
    in one process): each round's minibatches are drawn when it starts, the search uses the net as the round before
    left it (one round behind), and a session's second core does the learning that would otherwise wait for it."""

    game: str = DEFAULT_GAME
    simulations: int = field(default=64, metadata={"min": 1})
    c_puct: float = field(default=1.5, metadata={"min": 0.0})
    dirichlet_alpha: float = field(default=1.0, metadata={"min": 0.0})
    dirichlet_fraction: float = field(default=0.25, metadata={"min": 0.0, "max": 1.0})
    sample_moves: int = field(default=8, metadata={"min": 0})
    gamma: float = field(default=1.0, metadata={"min": 0.0, "max": 1.0})
    replay_size: int = field(default=100_000, metadata={"min": 1})
    batch_size: int = field(default=512, metadata={"min": 1})
    train_every: int = field(default=2048, metadata={"min": 1})
    learning_starts: int = field(default=2048, metadata={"min": 0})
    sample_reuse: float = field(default=4.0, metadata={"min": 0.0})
    value_loss_coef: float = field(default=1.0, metadata={"min": 0.0})
    mirror: bool = False
    rollout_weight: float = field(default=0.0, metadata={"min": 0.0, "max": 1.0})
    target_temperature: float = field(default=1.0, metadata={"min": 0.01})
    policy_target: Literal["visits", "completed_q"] = "visits"
    proven_positions: int = field(default=0, metadata={"min": 0})
    random_moves: int = field(default=0, metadata={"min": 0})
    random_move_rate: float = field(default=0.0, metadata={"min": 0.0, "max": 1.0})
    search_value_weight: float = field(default=0.0, metadata={"min": 0.0, "max": 1.0})
    learner_thread: bool = False


def sharpened(pi: np.ndarray, temperature: float) -> np.ndarray:
    """A move distribution raised to 1 / temperature and normalised (itself at temperature 1)."""
    if temperature == 1.0:
        return pi
    powered = pi ** (1.0 / temperature)
    return (powered / powered.sum()).astype(np.float32)


def completed_q_policy(root: Node, logits: np.ndarray, value: float, visit_scale: float = 50.0,
                       value_scale: float = 0.1) -> np.ndarray:
    """Gumbel AlphaZero's policy target (Danihelka et al. 2022, mctx's `qtransform_completed_by_mix_value`): softmax
    of the net's `logits` at the root plus sigma(q) over the root's children (the legal moves), q each move's mean
    return for the mover, an unvisited move's the mix of the net's `value` and the visited moves' prior-weighted q,
    rescaled to [0, 1], sigma(q) = (visit_scale + the most visits) * value_scale * q. A proven root: its proven move."""
    n = len(logits)
    if root.outcome is not None:
        return np.eye(n, dtype=np.float32)[choice(root)]
    visits, q = np.zeros(n), np.zeros(n)
    for child in root.children:
        if child.outcome is not None:
            visits[child.action], q[child.action] = max(child.visits, 1), child.outcome[child.player]
        elif child.visits:
            visits[child.action], q[child.action] = child.visits, child.total / child.visits
    legal = np.zeros(n, bool)
    legal[[child.action for child in root.children]] = True
    prior = np.where(legal, np.exp(logits - logits[legal].max()), 0.0)
    prior /= prior.sum()
    seen = visits > 0
    mixed = value
    if seen.any():
        mixed = (value + visits.sum() * (prior[seen] * q[seen]).sum() / prior[seen].sum()) / (1 + visits.sum())
    completed = np.where(seen, q, mixed)
    low, high = completed[legal].min(), completed[legal].max()
    scaled = (completed - low) / max(high - low, 1e-8)
    improved = np.where(legal, logits + (visit_scale + visits.max()) * value_scale * scaled, -np.inf)
    out = np.exp(improved - improved[legal].max())
    return (out / out.sum()).astype(np.float32)


def proven_move(node: Node, position: SearchState | None = None, win: float = 1.0) -> tuple[list[int], float] | None:
    """The moves a searched node's mover should play, as its search proved them, and the position's value for the
    mover (NaN: unknown): every child proven to win (`win` or more), value 1; else its one child not proven to lose
    when all the others are, value unknown; None otherwise. Given the node's `position`, where a threat shows (the
    search proved a child lost, or the most visited child of a node visited `THREAT_VISITS` times or more loses at
    once), the children it has not proved are tried two plies deep (`loses_at_once`), so a forced block is found
    though the search visited only some of the moves it refutes."""
    proven = [c for c in node.children if c.outcome is not None]
    if not proven and (position is None or node.visits < THREAT_VISITS):
        return None  # nothing proven and no threat to look for: most of a tree's nodes, answered at once
    wins = [c.action for c in proven if c.outcome[c.player] >= win]  # type: ignore[index]
    if wins:
        return wins, 1.0
    alive = [c for c in node.children if c.outcome is None or c.outcome[c.player] > -win]
    if position is not None and len(alive) > 1 and (len(alive) < len(node.children) or threatened(node, position, win)):
        alive = [c for c in alive if c.outcome is not None or not loses_at_once(position, c.action, win)]
    return ([alive[0].action], math.nan) if len(alive) == 1 and len(node.children) > 1 else None


THREAT_VISITS = 4


def threatened(node: Node, position: SearchState, win: float = 1.0) -> bool:
    """Whether a node visited `THREAT_VISITS` times or more has a most visited child that loses at once (a cheap sign
    of a threat, tried only where the search looked often)."""
    if node.visits < THREAT_VISITS:
        return False
    return loses_at_once(position, max(node.children, key=lambda c: c.visits).action, win)


def loses_at_once(position: SearchState, action: int, win: float = 1.0) -> bool:
    """Whether playing `action` from `position` lets the next player win with one move (the game's own
    `winning_actions()` where it has one)."""
    after = position.copy()
    after.apply(action)
    if after.is_terminal():
        return False
    fast = getattr(after, "winning_actions", None)
    if callable(fast):
        return bool(fast())
    replier = after.current_player()
    for reply in after.legal_actions():
        end = after.copy()
        end.apply(reply)
        if end.is_terminal() and end.returns()[replier] >= win:
            return True
    return False


def proven_positions(root: Node, state: SearchState, limit: int) -> list[tuple[SearchState, list[int], float]]:
    """Up to `limit` positions inside a searched tree (the root's own excluded) with their `proven_move`, found
    depth first, each rebuilt by playing the tree's moves on copies of the root's `state`."""
    found: list[tuple[SearchState, list[int], float]] = []
    stack = [(root, state)]
    while stack and len(found) < limit:
        node, position = stack.pop()
        for child in node.children:
            if not child.children:
                continue
            after = position.copy()
            after.apply(child.action)
            proven = proven_move(child, after)
            if proven is not None and len(found) < limit:
                found.append((after, *proven))
            stack.append((child, after))
    return found


class SearchReplay:
    """A ring of searched positions: observation, legal-action mask, the search's move distribution, the return."""

    def __init__(self, size: int, shape: tuple[int, ...], n_actions: int) -> None:
        self.obs = np.zeros((size, *shape), np.float32)
        self.mask = np.zeros((size, n_actions), bool)
        self.pi = np.zeros((size, n_actions), np.float32)
        self.z = np.zeros(size, np.float32)
        self.size, self.head, self.full = size, 0, False

    def __len__(self) -> int:
        return self.size if self.full else self.head

    def add(self, obs: np.ndarray, mask: np.ndarray, pi: np.ndarray, z: np.ndarray) -> None:
        """Append rows (the oldest are overwritten once full)."""
        for start in range(0, len(z), self.size):
            self._add(*(a[start:start + self.size] for a in (obs, mask, pi, z)))

    def _add(self, obs: np.ndarray, mask: np.ndarray, pi: np.ndarray, z: np.ndarray) -> None:
        idx = (self.head + np.arange(len(z))) % self.size
        self.obs[idx], self.mask[idx], self.pi[idx], self.z[idx] = obs, mask, pi, z
        self.full = self.full or self.head + len(z) >= self.size
        self.head = int((self.head + len(z)) % self.size)

    def state_dict(self) -> dict[str, Any]:
        n = len(self)
        order = (np.arange(n) + (self.head if self.full else 0)) % max(n, 1)  # oldest first
        return {name: torch.from_numpy(getattr(self, name)[order].copy()) for name in ("obs", "mask", "pi", "z")}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.head, self.full = 0, False
        self.add(*(state[name].numpy() for name in ("obs", "mask", "pi", "z")))


Minibatch = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # observations, legal masks, policies, values
Round = tuple[int, int, list[Minibatch]]  # a signature, its replay's size, the round's minibatches of it


@dataclass
class Learned:
    """A round of learning: the frame it began at, its gradient steps, each signature's last losses."""

    frame: int
    steps: int
    reports: list[dict[str, Any]]


class Episodes:
    """Each body's positions of its game so far: observation, mask, search distribution, the search's value for the
    mover and the reward that followed."""

    def __init__(self, num_bodies: int) -> None:
        self.rows: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = [[] for _ in range(num_bodies)]
        self.values: list[list[float]] = [[] for _ in range(num_bodies)]
        self.rewards: list[list[float]] = [[] for _ in range(num_bodies)]

    def add(self, body: int, obs: np.ndarray, mask: np.ndarray, pi: np.ndarray, reward: float,
            value: float = math.nan) -> None:
        self.rows[body].append((obs, mask, pi))
        self.values[body].append(value)
        self.rewards[body].append(reward)

    def finish(self, body: int, gamma: float, value_weight: float = 0.0
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """The body's game as arrays with each position's value target: its discounted return to the end, mixed with
        the search's value by `value_weight` where the search has one; None when it made no move. Forgets the game."""
        rows, rewards, values = self.rows[body], self.rewards[body], np.asarray(self.values[body], np.float32)
        self.drop(body)
        if not rows:
            return None
        steps = np.asarray(rewards, np.float32)[:, None]
        z = nstep_returns(steps, np.zeros(steps.shape, bool), np.zeros(1, np.float32), gamma)[:, 0]
        if value_weight > 0:
            z = np.where(np.isnan(values), z, (1 - value_weight) * z + value_weight * values).astype(np.float32)
        obs, mask, pi = (np.stack(a) for a in zip(*rows))
        return obs, mask, pi, z

    def drop(self, body: int) -> None:
        self.rows[body], self.values[body], self.rewards[body] = [], [], []


class ExpertIteration(Algorithm):
    """AlphaZero-style expert iteration: PUCT search chooses every training move; the net learns the search's move
    distributions and the games' results from a replay. One net over every group of one signature."""

    Config = ExpertIterationConfig
    action_spaces: ClassVar[tuple[type[gym.Space], ...]] = (gym.spaces.Discrete,)
    memory_names: ClassVar[tuple[str, ...]] = ()
    default_net: ClassVar[str | None] = "MLP"

    @classmethod
    def action_problem(cls, space: gym.Space) -> str | None:
        """Discrete actions that start at 0."""
        return super().action_problem(space) or zero_based_problem(cls.__name__, space)

    @classmethod
    def config_problem(cls, config: Any) -> tuple[str, str] | None:
        """A game that cannot rebuild positions from observations, or has no mirror to augment with, or the base's
        problems."""
        try:
            load_game(config.game)
        except ValueError as e:
            return "game", str(e)
        if config.mirror and not callable(getattr(game_class(config.game), "mirror", None)):
            return "mirror", (f'game "{config.game}" has no mirror(observations, masks, policies) to augment with; '
                              "set mirror to false")
        return super().config_problem(config)

    @classmethod
    def signatures_problem(cls, signatures: Any) -> str | None:
        """Search needs a Box observation to rebuild each position from."""
        for obs, _ in signatures:
            if not isinstance(obs, gym.spaces.Box):
                return f"ExpertIteration rebuilds positions from Box observations; got {obs}"
        return None

    @classmethod
    def fit_problem(cls, config: Any, signatures: Any) -> tuple[str, str] | None:
        """A game that cannot rebuild a position from these observations (tried on an all-zero one: connect four's
        empty board), or whose positions' actions are not these."""
        make = load_game(config.game)
        for obs, action in signatures:
            try:
                state = make(np.zeros(obs.shape, obs.dtype))
                legal = state.legal_actions()
            except Exception as e:  # noqa: BLE001  (any way a game fails on these observations is this one line)
                return "game", (f'game "{config.game}" cannot rebuild a position from observations {space_text(obs)}: '
                                f"{type(e).__name__}: {e}; set game to your game's class (module:Class, the "
                                "tree_search.SearchState protocol with a from_observation)")
            if not set(legal) <= set(range(discrete_n(action))):
                return "game", (f'game "{config.game}" has actions {legal} where the env has {space_text(action)}')
        return None

    def __init__(self, config: ExpertIterationConfig, ctx: AgentContext) -> None:
        super().__init__(config, ctx)
        self.check_groups()
        _, net_cls, net_cfg = resolve_component(ctx.net, NETS, self.default_net)
        self.device = resolve_device(net_cfg)
        torch.manual_seed(ctx.seed)
        self.rng = np.random.default_rng(ctx.seed)
        self.sig_of, sigs = group_signatures(self.groups)
        self.policy = ActorCritic(net_cls, net_cfg, sigs).to(self.device)
        self.optim = Optim(self.policy.parameters(), net_cfg.optim, net_cfg.clip_grad_norm)
        self.actor = copy.deepcopy(self.policy) if config.learner_thread else self.policy  # the net the search uses
        self.learner: threading.Thread | None = None
        self.learned: Learned | Exception | None = None
        self.from_observation = load_game(config.game)
        self.mirror = getattr(game_class(config.game), "mirror") if config.mirror else None
        self.mcts = MCTS(config.simulations, c_puct=config.c_puct, seed=ctx.seed)
        self.noise = (config.dirichlet_alpha, config.dirichlet_fraction) if config.dirichlet_fraction > 0 else None
        self.n_actions = [discrete_n(a) for _, a in sigs]
        self.replays = [SearchReplay(config.replay_size, obs_shape(o), n) for (o, _), n in zip(sigs, self.n_actions)]
        self.searched = [np.zeros((g.num_bodies, self.n_actions[self.sig_of[i]]), np.float32)
                         for i, g in enumerate(self.groups)]
        self.searched_values = [np.full(g.num_bodies, np.nan, np.float32) for g in self.groups]
        self.moves = [np.zeros(g.num_bodies, np.int64) for g in self.groups]
        self.random_left = [np.zeros(g.num_bodies, np.int64) for g in self.groups]
        self.episodes = [Episodes(g.num_bodies) for g in self.groups]
        self.new_positions = 0

    def act(self, group: int, obs: np.ndarray, mask: np.ndarray | None = None,
            acting: np.ndarray | None = None) -> np.ndarray:
        """Training: each acting body's move by PUCT search from its position; else the raw policy's greedy move."""
        sig = self.sig_of[group]
        if not self.training:
            self._wait()
            with torch.no_grad():
                logits, _ = self.policy.heads(self._tensor(obs), sig, need_value=False)
                if mask is not None:
                    logits = masked(logits, mask)
            return logits.argmax(dim=1).cpu().numpy()
        rows = np.arange(len(obs)) if acting is None else np.flatnonzero(acting)
        actions = np.zeros(len(obs), np.int64)
        if len(rows):
            with paused_gc():  # the trees die inside: a collection after the search would walk all their nodes
                self._search_moves(group, obs, mask, rows, actions)
        return actions

    def _search_moves(self, group: int, obs: np.ndarray, mask: np.ndarray | None, rows: np.ndarray,
                      actions: np.ndarray) -> None:
        """Search from each of `rows`' positions; keep the targets and proven positions; write the moves to play."""
        sig = self.sig_of[group]
        states = [self.from_observation(obs[r]) for r in rows]
        if mask is not None:
            self._check_positions(states, mask[rows])
        roots = self.mcts.search_many(states, self._evaluator(group), self.noise, self.rng)
        searched, moves = self.searched[group], self.moves[group]
        visits = [visit_policy(root, self.n_actions[sig]) for root in roots]
        searched[rows] = self._targets(group, roots, visits, obs[rows], None if mask is None else mask[rows])
        self.searched_values[group][rows] = [root_value(root) for root in roots]
        if self.config.proven_positions:
            self._keep_proven(sig, roots, states)
        random_left = self.random_left[group]
        for r, root, pi, state in zip(rows, roots, visits, states):
            if moves[r] == 0 and self.config.random_moves:
                random_left[r] = self.rng.integers(0, self.config.random_moves + 1)
            if moves[r] < random_left[r] or (self.config.random_move_rate and
                                             self.rng.random() < self.config.random_move_rate):
                actions[r] = self.rng.choice(state.legal_actions())
            elif moves[r] < self.config.sample_moves and root.outcome is None:
                actions[r] = self.rng.choice(len(pi), p=pi / pi.sum())
            else:
                actions[r] = choice(root)
            moves[r] += 1

    def _check_positions(self, states: list[SearchState], masks: np.ndarray) -> None:
        """Each rebuilt position's legal moves against the env's action mask: a game whose from_observation misreads
        this env's observations fails here in one line, not later in a search over moves the env does not have."""
        for state, legal_mask in zip(states, masks):
            legal = state.legal_actions()
            if len(legal) != np.count_nonzero(legal_mask) or not legal_mask[legal].all():
                raise ValueError(f'game "{self.config.game}" rebuilt a position whose legal actions {sorted(legal)} '
                                 f"are not the env's action mask {np.flatnonzero(legal_mask).tolist()}: its "
                                 "from_observation does not read this env's observations")

    def _keep_proven(self, sig: int, roots: list[Node], states: list[SearchState]) -> None:
        """Each tree's proven positions into the signature's replay: the proven moves as the policy, a win's value."""
        found = [p for root, state in zip(roots, states) for p in proven_positions(root, state,
                                                                                   self.config.proven_positions)]
        if not found:
            return
        n = self.n_actions[sig]
        obs, legal = observations([position for position, _, _ in found], n)
        pi = np.zeros((len(found), n), np.float32)
        for row, (_, moves, _) in enumerate(found):
            pi[row, moves] = 1.0 / len(moves)
        self.replays[sig].add(obs.astype(np.float32), legal, pi, np.array([v for _, _, v in found], np.float32))

    def _targets(self, group: int, roots: list[Node], visits: list[np.ndarray], obs: np.ndarray,
                 mask: np.ndarray | None) -> np.ndarray:
        """The policy targets of searched roots: their visit distributions (`visits`) sharpened, or the completed-Q
        policy over the net's own logits and value at each root (one forward pass for all)."""
        if self.config.policy_target == "visits":
            return np.stack([sharpened(pi, self.config.target_temperature) for pi in visits])
        with torch.no_grad():
            logits, v = self.actor.heads(self._tensor(obs), self.sig_of[group])
            if mask is not None:
                logits = masked(logits, mask)
        assert v is not None  # the policy always has its value head
        values = np.clip(v.cpu().numpy(), -1.0, 1.0).tolist()
        return np.stack([completed_q_policy(root, row, value)
                         for root, row, value in zip(roots, logits.cpu().numpy().astype(np.float64), values)])

    def _evaluator(self, group: int) -> Callable[[list[SearchState]], list[Evaluation]]:
        """Leaf evaluation in one forward pass: priors over the legal moves and the mover's value (minus it for the
        others)."""

        def evaluate(states: list[SearchState]) -> list[Evaluation]:
            obs, legal = observations(states, self.n_actions[self.sig_of[group]])
            probs, values = self.policy_value(group, obs, legal)
            w = self.config.rollout_weight
            out: list[Evaluation] = []
            for s, p, v in zip(states, probs.tolist(), values.tolist()):
                returns = [-v] * len(s.returns())
                returns[s.current_player()] = v
                if w > 0:
                    returns = [(1 - w) * a + w * b for a, b in zip(returns, self.mcts.rollouts_from(s))]
                out.append((p, returns))
            return out

        return evaluate

    def policy_value(self, group: int, obs: np.ndarray, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(action probabilities (B, n), the mover's values in [-1, 1] (B,)) for observations of `group`'s signature:
        what search takes as priors and leaf values: in training the search's net, else the learner's latest."""
        net = self.actor if self.training else self._wait()
        with torch.no_grad():
            logits, v = net.heads(self._tensor(obs), self.sig_of[group])
            if mask is not None:
                logits = masked(logits, mask)
            probs = torch.softmax(logits, dim=-1).cpu().numpy()
        assert v is not None  # the policy always has its value head
        return probs, np.clip(v.cpu().numpy(), -1.0, 1.0)

    def _tensor(self, x: np.ndarray) -> torch.Tensor:
        return to_tensor(np.asarray(x, np.float32), self.device)

    def update(self, group: int, transition: Transition) -> None:
        """Keep each completed move with its search's distribution; a body's game that ended goes to the replay with
        its returns (a cut game is dropped: its result is unknown); train every `train_every` new positions."""
        super().update(group, transition)
        if not self.training:
            return
        episodes, searched, values = self.episodes[group], self.searched[group], self.searched_values[group]
        completed = np.ones(len(transition.reward), bool) if transition.completed is None else transition.completed
        mask = transition.action_mask
        for r in np.flatnonzero(completed).tolist():
            legal = np.ones(searched.shape[1], bool) if mask is None else mask[r].astype(bool)
            episodes.add(r, transition.obs[r].astype(np.float32), legal, searched[r].copy(),
                         float(transition.reward[r]), float(values[r]))
        replay = self.replays[self.sig_of[group]]
        for r in np.flatnonzero(transition.done).tolist():
            game = episodes.finish(r, self.config.gamma, self.config.search_value_weight)
            if game is not None and transition.terminated[r]:
                replay.add(*game)
                self.new_positions += len(game[3])
        self.moves[group][transition.done] = 0
        if self.new_positions >= self.config.train_every and len(replay) >= self.config.learning_starts:
            self._train()

    def episodes_ended(self, group: int, rows: np.ndarray) -> None:
        """Bodies whose game ended outside training start their next game's move count afresh."""
        self.moves[group][rows] = 0
        for r in np.flatnonzero(rows).tolist():
            self.episodes[group].drop(r)

    def _train(self) -> None:
        """`sample_reuse * new / batch_size` steps on minibatches of every signature's replay: here, or on the learner
        thread (after the last round's learning is done and handed to the search's net)."""
        cfg = self.config
        steps = math.ceil(cfg.sample_reuse * self.new_positions / cfg.batch_size)
        self.new_positions = 0
        if steps == 0:  # sample_reuse 0: the search plays, the net does not learn
            return
        self._wait()
        if self.actor is not self.policy:
            self.actor.load_state_dict(self.policy.state_dict())
        self.optim.set_frame(self.frame)
        rounds = [(sig, len(replay), [self._minibatch(replay) for _ in range(steps)])
                  for sig, replay in enumerate(self.replays) if len(replay) >= max(cfg.learning_starts, 1)]
        if self.actor is self.policy:
            self._finish(self._learn(rounds, self.frame))
            return
        self.learner = threading.Thread(target=self._learn_on_thread, args=(rounds, self.frame, torch.get_num_threads()),
                                        name="expert-iteration-learner", daemon=True)
        self.learner.start()

    def _learn_on_thread(self, rounds: list[Round], frame: int, threads: int) -> None:
        """The learner thread's work: `_learn`, its result or its exception kept for `_wait`."""
        torch.set_num_threads(threads)
        try:
            self.learned = self._learn(rounds, frame)
        except Exception as e:  # noqa: BLE001  (raised again in the main thread, by _wait)
            self.learned = e

    def _learn(self, rounds: list[Round], frame: int) -> Learned:
        """Gradient steps on each signature's minibatches; what they did, for `_finish`."""
        reports: list[dict[str, Any]] = []
        for sig, size, batches in rounds:
            for batch in batches:
                policy_loss, value_loss = self._losses(sig, *batch)
                loss = policy_loss + self.config.value_loss_coef * value_loss
                self.optim.step(loss)
            reports.append({"train/loss": float(loss.detach()), "train/policy_loss": float(policy_loss.detach()),
                            "train/value_loss": float(value_loss.detach()), "train/lr": self.optim.lr,
                            "train/replay": size})
        return Learned(frame, sum(len(batches) for _, _, batches in rounds), reports)

    def _finish(self, learned: Learned) -> None:
        """Count a round's steps and report its losses (in the main thread, at the frame the round began)."""
        self.opt_step += learned.steps
        for report in learned.reports:
            self.last_loss = report["train/loss"]
            self.stats.report(learned.frame, report)

    def _wait(self) -> ActorCritic:
        """The learner thread's round finished and counted (its exception raised here); the learner's net."""
        if self.learner is not None:
            self.learner.join()
            self.learner, learned, self.learned = None, self.learned, None
            if isinstance(learned, Exception):
                raise learned
            assert learned is not None
            self._finish(learned)
        return self.policy

    def _minibatch(self, replay: SearchReplay) -> Minibatch:
        """A minibatch of the replay's positions, half of it mirrored when the game is symmetric."""
        idx = self.rng.integers(0, len(replay), min(self.config.batch_size, len(replay)))
        obs, mask, pi, z = replay.obs[idx], replay.mask[idx], replay.pi[idx], replay.z[idx]
        if self.mirror is not None:
            flip = self.rng.random(len(idx)) < 0.5
            obs[flip], mask[flip], pi[flip] = self.mirror(obs[flip], mask[flip], pi[flip])
        return obs, mask, pi, z

    def _losses(self, sig: int, obs: np.ndarray, mask: np.ndarray, pi: np.ndarray,
                z: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-entropy to the search's distributions and squared error to the returns, on one minibatch."""
        logits, v = self.policy.heads(self._tensor(obs), sig)
        assert v is not None
        logp = torch.log_softmax(masked(logits, mask), dim=-1)
        policy_loss = -(self._tensor(pi) * logp).sum(dim=1).mean()
        known = ~np.isnan(z)  # a proven position's value may be unknown
        if known.all():
            return policy_loss, F.mse_loss(v, self._tensor(z))
        keep = torch.as_tensor(known, device=v.device)
        value_loss = F.mse_loss(v[keep], self._tensor(z[known])) if known.any() else v.sum() * 0
        return policy_loss, value_loss

    def state_dict(self) -> dict[str, Any]:
        """Net, optimiser, random states (the search's rollouts and tie-breaks too), counters, positions waiting to
        train; with a learner thread, its round finished first, and the search's net (a round behind)."""
        self._wait()
        state = super().state_dict()
        if self.actor is not self.policy:
            state["actor"] = self.actor.state_dict()
        state.update(policy=self.policy.state_dict(), optim=self.optim.state_dict(),
                     rng=self.rng.bit_generator.state, search_rng=list(self.mcts.rng.getstate()[1]),
                     new_positions=self.new_positions)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._wait()  # first: a round still learning would count its steps on top of the loaded ones
        super().load_state_dict(state)
        self.policy.load_state_dict(state["policy"])
        if self.actor is not self.policy:
            self.actor.load_state_dict(state.get("actor", state["policy"]))
        self.optim.load_state_dict(state["optim"])
        self.rng.bit_generator.state = state["rng"]
        if "search_rng" in state:  # agent files of 2026-12-02 03:40 and before lack it
            self.mcts.rng.setstate((3, tuple(state["search_rng"]), None))
        self.new_positions = int(state["new_positions"])

    def memory_state_dict(self) -> dict[str, Any]:
        """Every signature's replay of searched positions."""
        return {"replay": [r.state_dict() for r in self.replays]}

    def load_memory_state_dict(self, state: dict[str, Any]) -> None:
        for replay, saved in zip(self.replays, state["replay"]):
            replay.load_state_dict(saved)
