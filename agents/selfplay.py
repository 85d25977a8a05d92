"""Self-play with an opponent pool: an algorithm-agnostic wrapper that lets other players take seats.

An agent that owns every seat of a game (both bodies of connect four) already plays itself with one
shared network. With `opponent_pool` in its spec entry, the lab wraps it in `OpponentPool`, whose
*members* can take one seat of a game:
- snapshots: every `refresh_frames` of the learner's own frames a frozen copy (its state_dict) joins the
  pool of the last `size`;
- `random`: a uniform random legal player (with `random_prob` > 0);
- scripted players named `module:Class` in `scripted` (e.g. connect four's WinBlockPlayer), each one
  instance `Class(seed=...)` fed PettingZoo-style dicts {"observation", "action_mask"};
- frozen agents in `frozen`: agent state files of earlier runs (`session_0/agent_a0.pt`), each loaded once into a
  copy of the learner (so they must fit its algorithm and net): the opponents of an exploiter or a league exploiter.
When a game ends, its next game is drawn: with `sampling: "uniform"` a random seat goes with probability
`random_prob` to random play, `prob` to a snapshot drawn uniformly, `scripted_prob` to a scripted
player drawn uniformly, `frozen_prob` to a frozen agent drawn uniformly, and otherwise the game is pure
self-play. With `sampling: "pfsp"` (prioritized fictitious self-play) a game has a pool member with
probability `random_prob + prob + scripted_prob + frozen_prob`, drawn among the enabled members with
weight (1 - s)^pfsp_power, s the learner's recent score against that member (win 1, draw 0.5, loss 0;
0.5 before any game): hard opponents more often.

The pool keeps each member's score and an openskill rating (the learner and every member, updated after
each pool game; a snapshot starts at the learner's rating when taken) and puts them in the learner's
stats rows (`pool/score/<member>`, `pool/rating/<member>`, snapshots summed up as `snapshots`). The
learner acts for and learns from its own seats only: members' rows leave act's `acting` and
Transition.completed. Any Algorithm whose state_dict/load_state_dict carry its policy works.

A group whose bodies are several games (a batch env such as connect_four_batch: `game_seats` bodies per
game, game by game in slot order) draws the seats of each game as it ends.
"""
from __future__ import annotations

import copy
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Literal

import numpy as np
from openskill.models import PlackettLuce

from slm_lab_like.agents.base import Algorithm, Transition
from slm_lab_like.agents.explore import random_legal
from slm_lab_like.agents.scripted import load_policy

SCORE_WINDOW = 100  # a member's score is the mean of its first games, then a moving mean over about this many


@dataclass
class ScriptedMember:
    """A scripted pool member given with arguments: `policy` `module:Class`, made as Class(seed=..., **kwargs) (e.g.
    slm_lab_like.envs.mcts:MCTSPlayer with {"simulations": 50}); `name`: its name in the pool's stats (default the
    class name)."""

    policy: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    name: str | None = None


def scripted_member(entry: str | ScriptedMember) -> ScriptedMember:
    """A `scripted` entry as a ScriptedMember (a plain `module:Class` takes no arguments)."""
    return ScriptedMember(entry) if isinstance(entry, str) else entry


@dataclass
class OpponentPoolConfig:
    """Pool of the last `size` snapshots, one taken every `refresh_frames` learner frames, plus fixed members
    (`random_prob` > 0: uniform random play; `scripted`: `module:Class` players, or {policy, kwargs, name}
    objects; `frozen`: agent state files of other runs). `prob`, `random_prob`, `scripted_prob` and
    `frozen_prob`: the chance that a game's seat goes to a snapshot, to random play, to a scripted player, to
    a frozen agent (uniform sampling; pfsp draws among them by the learner's score, hard ones more often:
    `pfsp_power`); `game_seats`: bodies per game when a group hosts several games (0: the whole group is one
    game)."""

    size: int = field(default=5, metadata={"min": 1})
    refresh_frames: int = field(default=10_000, metadata={"min": 1})
    prob: float = field(default=0.5, metadata={"min": 0.0, "max": 1.0})
    random_prob: float = field(default=0.0, metadata={"min": 0.0, "max": 1.0})
    scripted: list[str | ScriptedMember] = field(default_factory=list)
    scripted_prob: float = field(default=0.0, metadata={"min": 0.0, "max": 1.0})
    frozen: list[str] = field(default_factory=list)
    frozen_prob: float = field(default=0.0, metadata={"min": 0.0, "max": 1.0})
    sampling: Literal["uniform", "pfsp"] = "uniform"
    pfsp_power: float = field(default=2.0, metadata={"min": 0.0})
    game_seats: int = field(default=0, metadata={"min": 0})


def pool_problem(config: OpponentPoolConfig) -> tuple[str, str] | None:
    """(key, one-line reason) when the pool cannot run as configured, or None."""
    share = config.prob + config.random_prob + config.scripted_prob + config.frozen_prob
    if share > 1.0 + 1e-9:
        return "prob", f"prob + random_prob + scripted_prob + frozen_prob must be at most 1, got {share:g}"
    if config.scripted_prob > 0 and not config.scripted:
        return "scripted_prob", "scripted_prob > 0 needs players in scripted"
    if config.frozen_prob > 0 and not config.frozen:
        return "frozen_prob", "frozen_prob > 0 needs agent state files in frozen"
    for k, path in enumerate(config.frozen):
        try:
            frozen_state(path)
        except ValueError as e:
            return f"frozen[{k}]", str(e)
    for k, entry in enumerate(config.scripted):
        member = scripted_member(entry)
        try:
            load_policy(member.policy, member.kwargs)
        except ValueError as e:
            return f"scripted[{k}]", str(e)
    return None


def frozen_state(path: str) -> dict[str, Any]:
    """The policy state in an agent state file (a pool's learner part where the agent had a pool); ValueError in one
    line when it is not such a file. Loaded with weights_only=True: no pickle runs."""
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ValueError(f"no agent state file {path}") from None
    except Exception as e:  # noqa: BLE001  (any way torch fails to read it is this one-line error)
        raise ValueError(f"{path} is not an agent state file: {type(e).__name__}: {str(e).splitlines()[0]}") from None
    if not isinstance(state, dict):
        raise ValueError(f"{path} is not an agent state file (it holds a {type(state).__name__})")
    return state["learner"] if "learner" in state and "pool" in state else state


@dataclass
class Member:
    """One pool member: its name, kind ("random", "scripted", "frozen", "snapshot") and what plays for it."""

    name: str
    kind: str
    player: Any = None
    score: float = 0.5
    games: int = 0


class OpponentPool(Algorithm):
    """Wraps a learner; pool members (snapshots, random play, scripted players) take a seat in a share of games."""

    def __init__(self, learner: Algorithm, make_frozen: Callable[[], Algorithm], config: OpponentPoolConfig,
                 seed: int) -> None:
        self.learner = learner
        super().__init__(config, learner.ctx)
        self.make_frozen = make_frozen
        self.rng = np.random.default_rng(seed)
        self.model = PlackettLuce()
        self.learner_rating = self.model.rating(name="learner")
        self.fixed: list[Member] = []
        if config.random_prob > 0:
            self.fixed.append(Member("random", "random"))
        for k, entry in enumerate(config.scripted):
            spec = scripted_member(entry)
            make = load_policy(spec.policy, spec.kwargs)
            name = spec.name or spec.policy.rpartition(":")[2]
            self.fixed.append(Member(name if all(m.name != name for m in self.fixed) else f"{name}{k}", "scripted",
                                     make(seed=seed + 7919 * (k + 1))))
        for k, path in enumerate(config.frozen):
            self.fixed.append(Member(f"frozen{k}", "frozen", self._frozen_player(path, k)))
        self.ratings = {m.name: self.model.rating(name=m.name) for m in self.fixed}
        self.snapshots: deque[Member] = deque(maxlen=config.size)
        self.pool: deque[dict[str, Any]] = deque(maxlen=config.size)
        self.seat_member = [np.full(g.num_bodies, None, dtype=object) for g in self.groups]
        seats = config.game_seats
        for g in self.groups:
            if seats and g.num_bodies % seats:
                raise ValueError(f"opponent_pool.game_seats: {g.num_bodies} bodies in env \"{g.env_name}\" are not "
                                 f"whole games of {seats} seats")
        self.batched = [0 < seats < g.num_bodies for g in self.groups]
        self.snapshots_taken = 0
        self.next_snapshot = config.refresh_frames
        self.stats = learner.stats

    def _frozen_player(self, path: str, k: int) -> Algorithm:
        """A copy of the learner holding the state in `path`, greedy and not learning."""
        player = self.make_frozen()
        try:
            player.load_state_dict(frozen_state(path))
        except (RuntimeError, KeyError, ValueError) as e:
            raise ValueError(f"opponent_pool.frozen[{k}]: {path} does not fit this agent's algorithm and net: "
                             f"{str(e).splitlines()[0]}") from None
        player.set_training(False)
        return player

    @property
    def frame(self) -> int:
        return self.learner.frame

    @frame.setter
    def frame(self, value: int) -> None:
        self.learner.frame = value

    @property
    def opt_step(self) -> int:
        return self.learner.opt_step

    @opt_step.setter
    def opt_step(self, value: int) -> None:
        self.learner.opt_step = value

    @property
    def last_loss(self) -> float:
        return self.learner.last_loss

    @last_loss.setter
    def last_loss(self, value: float) -> None:
        self.learner.last_loss = value

    @property
    def members(self) -> list[Member]:
        """Every member now in the pool: the fixed ones, then the snapshots, oldest first."""
        return self.fixed + list(self.snapshots)

    @property
    def frozen_rows(self) -> list[np.ndarray]:
        """Per group, the bodies a pool member plays now."""
        return [np.array([m is not None for m in seats], dtype=bool) for seats in self.seat_member]

    def act(self, group: int, obs: np.ndarray, mask: np.ndarray | None = None,
            acting: np.ndarray | None = None) -> np.ndarray:
        """Learner actions for its seats, each member's actions for the seats it holds."""
        rows = acting
        seats = self.seat_member[group]
        frozen = np.array([m is not None for m in seats], dtype=bool)
        if not (self.training and frozen.any()):
            return self._act_with(self.learner, group, obs, mask, rows)
        own = ~frozen if rows is None else rows & ~frozen
        theirs = frozen if rows is None else rows & frozen
        out = self._act_with(self.learner, group, obs, mask, own) if own.any() else None
        for member in {id(m): m for m in seats[theirs]}.values():
            held = theirs & np.array([m is member for m in seats], dtype=bool)
            out = self._merge(out, self._member_actions(member, group, obs, mask, held), held)
        assert out is not None  # some seat acted: the learner's or a member's
        return out

    def _member_actions(self, member: Member, group: int, obs: np.ndarray, mask: np.ndarray | None,
                        rows: np.ndarray) -> np.ndarray:
        """Actions of one member for the group (meaningful in `rows`)."""
        space = self.groups[group].action_space
        if member.kind == "random":
            if mask is not None:
                return random_legal(mask, self.rng)
            return np.stack([space.sample() for _ in range(len(obs))]).astype(space.dtype)
        if member.kind == "scripted":
            out = np.zeros((len(obs),) + tuple(space.shape or ()), space.dtype)
            for i in np.flatnonzero(rows):
                out[i] = member.player(obs[i] if mask is None else {"observation": obs[i], "action_mask": mask[i]})
            return out
        return np.asarray(self._act_with(member.player, group, obs, mask, rows))

    @staticmethod
    def _merge(out: np.ndarray | None, other: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """`other`'s actions in `rows`, `out`'s elsewhere (`other` itself when nothing was chosen yet)."""
        if out is None:
            return other
        return np.where(rows.reshape((-1,) + (1,) * (np.ndim(out) - 1)), other, out)

    @staticmethod
    def _act_with(agent: Algorithm, group: int, obs: np.ndarray, mask: np.ndarray | None,
                  rows: np.ndarray | None) -> np.ndarray:
        return agent.act(group, obs, mask=mask, acting=rows)

    def update(self, group: int, transition: Transition) -> None:
        """Pass the learner's own rows on; snapshot on schedule; score and redraw each game that ended."""
        seats = self.seat_member[group]
        frozen = np.array([m is not None for m in seats], dtype=bool)
        ended = transition.done if transition.completed is None else transition.done & transition.completed
        if ended.any():
            self._score(group, ended, np.asarray(transition.reward))
        if self.training and frozen.any():
            own = ~frozen if transition.completed is None else transition.completed & ~frozen
            transition = replace(transition, completed=own)
        if transition.completed is None or transition.completed.any():
            self.learner.update(group, transition)
        if self.learner.frame >= self.next_snapshot:
            self.next_snapshot = self.learner.frame + self.config.refresh_frames
            self._snapshot(copy.deepcopy(self.learner.state_dict()), f"snapshot@{self.learner.frame}")
        if ended.any():
            self.episodes_ended(group, ended)
            self._draw(group, ended)
        self._add_pool_stats()

    def _snapshot(self, state: dict[str, Any], name: str) -> None:
        """A frozen copy of `state` joins the pool (replacing the oldest when full), rated as the learner is now."""
        if len(self.snapshots) == self.config.size:
            oldest = self.snapshots[0]
            player = oldest.player
            self.ratings.pop(oldest.name, None)  # its games under way finish with the new snapshot's play, unrated
        else:
            player = self.make_frozen()
        player.load_state_dict(state)
        player.set_training(False)
        for g, group in enumerate(self.groups):
            player.episodes_ended(g, np.ones(group.num_bodies, dtype=bool))  # its games start from no memory
        self.pool.append(state)
        self.snapshots.append(Member(name, "snapshot", player))
        self.ratings[name] = self.model.rating(mu=self.learner_rating.mu, sigma=self.learner_rating.sigma, name=name)
        self.snapshots_taken += 1

    def _games(self, group: int, ended: np.ndarray) -> list[int]:
        """First slots of the games that have bodies in `ended`."""
        seats = self.config.game_seats if self.batched[group] else len(ended)
        return [k * seats for k in np.unique(np.flatnonzero(ended) // seats).tolist()]

    def _score(self, group: int, ended: np.ndarray, reward: np.ndarray) -> None:
        """Record the learner's result in each ended game that a member played (the learner's seat's reward)."""
        seats = self.seat_member[group]
        width = self.config.game_seats if self.batched[group] else len(ended)
        for first in self._games(group, ended):
            game = slice(first, first + width)
            members = [m for m in seats[game] if m is not None]
            own = ended[game] & np.array([m is None for m in seats[game]], dtype=bool)
            if not members or not own.any():
                continue
            r = float(reward[game][own].sum())
            result = 1.0 if r > 0 else 0.0 if r < 0 else 0.5
            member = members[0]
            member.games += 1
            member.score += (result - member.score) / min(member.games, SCORE_WINDOW)
            rating = self.ratings.get(member.name)
            if rating is not None:
                ranks = [0.0, 1.0] if result == 1.0 else [1.0, 0.0] if result == 0.0 else [0.0, 0.0]
                [[self.learner_rating], [self.ratings[member.name]]] = self.model.rate(
                    [[self.learner_rating], [rating]], ranks=ranks)

    def _candidates(self) -> tuple[list[Member], np.ndarray]:
        """The members a pool game may draw and their chances (which sum to the chance that a game has one)."""
        c = self.config
        groups = [([m for m in self.fixed if m.kind == "random"], c.random_prob),
                  (list(self.snapshots), c.prob),
                  ([m for m in self.fixed if m.kind == "scripted"], c.scripted_prob),
                  ([m for m in self.fixed if m.kind == "frozen"], c.frozen_prob)]
        groups = [(ms, p) for ms, p in groups if ms and p > 0]
        if not groups:
            return [], np.zeros(0)
        members = [m for ms, _ in groups for m in ms]
        if c.sampling == "uniform":
            chances = np.array([p / len(ms) for ms, p in groups for _ in ms])
        else:
            share = c.prob + c.random_prob + c.scripted_prob + c.frozen_prob
            weights = np.array([(1.0 - m.score) ** c.pfsp_power for m in members]) + 1e-6
            chances = share * weights / weights.sum()
        return members, chances

    def _draw(self, group: int, ended: np.ndarray) -> None:
        """Seats of each ended game's next game: all the learner's, or one seat (drawn) for a pool member."""
        seats = self.seat_member[group]
        width = self.config.game_seats if self.batched[group] else len(ended)
        if width < 2:
            return
        members, chances = self._candidates()
        for first in self._games(group, ended):
            seats[first:first + width] = None
            u = self.rng.random()
            k = int(np.searchsorted(np.cumsum(chances), u, side="right"))
            if k < len(members):
                seats[first + int(self.rng.integers(width))] = members[k]

    def pool_stats(self) -> dict[str, float]:
        """The learner's score against each member and everyone's rating (mu); snapshots as their mean."""
        out: dict[str, float] = {"pool/rating/learner": float(self.learner_rating.mu)}
        for m in self.fixed:
            out[f"pool/score/{m.name}"] = m.score
            out[f"pool/rating/{m.name}"] = float(self.ratings[m.name].mu)
        snaps = list(self.snapshots)
        out["pool/score/snapshots"] = float(np.mean([m.score for m in snaps])) if snaps else 0.5
        out["pool/rating/snapshots"] = (float(np.mean([self.ratings[m.name].mu for m in snaps])) if snaps
                                        else float(self.learner_rating.mu))
        return out

    def _add_pool_stats(self) -> None:
        """Add the pool's figures to the learner's new stats reports (one row each, so the CSV has them from the start)."""
        pending = self.stats.pending
        if pending and "pool/rating/learner" not in pending[-1][1]:
            values = self.pool_stats()
            for _, row in pending:
                if "pool/rating/learner" not in row:
                    row.update(values)

    def group_finished(self, group: int) -> None:
        self.learner.group_finished(group)

    def episodes_ended(self, group: int, rows: np.ndarray) -> None:
        """The learner and every frozen member forget the bodies whose game ended (whoever plays them next)."""
        self.learner.episodes_ended(group, rows)
        for member in self.members:
            if member.kind in ("snapshot", "frozen"):
                member.player.episodes_ended(group, rows)

    def set_training(self, training: bool) -> None:
        """Evaluation plays every seat with the learner."""
        self.training = training
        self.learner.set_training(training)

    def state_dict(self) -> dict[str, Any]:
        """The learner's state plus the pool (snapshots, scores, ratings) and its schedule."""
        members = {m.name: {"score": m.score, "games": m.games} for m in self.members}
        ratings = {name: [float(r.mu), float(r.sigma)] for name, r in self.ratings.items()}
        ratings["learner"] = [float(self.learner_rating.mu), float(self.learner_rating.sigma)]
        return {"learner": self.learner.state_dict(), "pool": list(self.pool),
                "pool_names": [m.name for m in self.snapshots], "members": members, "ratings": ratings,
                "next_snapshot": self.next_snapshot, "frame": self.frame, "opt_step": self.opt_step}

    def memory_state_dict(self) -> dict[str, Any]:
        return self.learner.memory_state_dict()

    def load_memory_state_dict(self, state: dict[str, Any]) -> None:
        self.learner.load_memory_state_dict(state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.learner.load_state_dict(state["learner"])
        names = list(state.get("pool_names") or [f"snapshot{i}" for i in range(len(state["pool"]))])
        self.snapshots.clear()
        self.pool.clear()
        for seats in self.seat_member:
            seats[:] = None
        ratings = state.get("ratings", {})
        for snap, name in zip(state["pool"], names):
            self._snapshot(snap, name)
        self.snapshots_taken = len(self.snapshots)
        for m in self.members:
            saved = state.get("members", {}).get(m.name)
            if saved:
                m.score, m.games = float(saved["score"]), int(saved["games"])
            if m.name in ratings:
                self.ratings[m.name] = self.model.rating(mu=ratings[m.name][0], sigma=ratings[m.name][1], name=m.name)
        if "learner" in ratings:
            self.learner_rating = self.model.rating(mu=ratings["learner"][0], sigma=ratings["learner"][1],
                                                    name="learner")
        self.next_snapshot = int(state["next_snapshot"])
