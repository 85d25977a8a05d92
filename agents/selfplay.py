"""Self-play with an opponent pool: an algorithm-agnostic wrapper that lets frozen past copies take seats.

An agent that owns every seat of a game (both bodies of connect four) already plays itself with one
shared network. With `opponent_pool` in its spec entry, the lab wraps it in `OpponentPool`: every
`refresh_frames` of the learner's own frames a snapshot (its state_dict) joins a pool of the last
`size`; when a game ends in a group, the next game of that group is, with probability `prob`, played
with one seat (drawn at random) taken by a frozen player loaded from a random snapshot, or with
probability `random_prob` by a uniform random legal player (the pool's fixed weakest member, which
keeps the learner sound against play unlike its own; 0 by default: pure self-play). The learner
acts for and learns from its own seats only: the frozen seat's rows leave `act_rows` and
Transition.acting. Any Algorithm whose state_dict/load_state_dict carry its policy works.

A group whose bodies are several games (a batch env such as connect_four_batch: `game_seats` bodies per
game, game by game in slot order) draws the seats of each game as it ends; its frozen snapshot seats all
play one snapshot, drawn anew whenever the pool takes one (one load per refresh, not one per game).
"""
from __future__ import annotations

import copy
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from slm_lab_like.agents.base import Algorithm, Transition
from slm_lab_like.agents.explore import random_legal

@dataclass
class OpponentPoolConfig:
    """Pool of the last `size` snapshots, one taken every `refresh_frames` learner frames; `prob`: the
    chance that a game has a frozen seat (the other games are pure self-play against the current net);
    `game_seats`: bodies per game when a group hosts several games (0: the whole group is one game)."""

    size: int = field(default=5, metadata={"min": 1})
    refresh_frames: int = field(default=10_000, metadata={"min": 1})
    prob: float = field(default=0.5, metadata={"min": 0.0, "max": 1.0})
    random_prob: float = field(default=0.0, metadata={"min": 0.0, "max": 1.0})
    game_seats: int = field(default=0, metadata={"min": 0})


class OpponentPool(Algorithm):
    """Wraps a learner; frozen snapshots of it play a random seat in a share of the games."""

    def __init__(self, learner: Algorithm, make_frozen: Callable[[], Algorithm], config: OpponentPoolConfig,
                 seed: int) -> None:
        self.learner = learner
        super().__init__(config, learner.ctx)
        self.frozen = make_frozen()
        self.frozen.set_training(False)
        self.pool: deque[dict[str, Any]] = deque(maxlen=config.size)
        self.rng = np.random.default_rng(seed)
        self.frozen_rows = [np.zeros(g.num_bodies, dtype=bool) for g in self.groups]
        self.random_rows = [np.zeros(g.num_bodies, dtype=bool) for g in self.groups]
        self.wanted: list[int] = [-1] * len(self.groups)
        seats = config.game_seats
        for g in self.groups:
            if seats and g.num_bodies % seats:
                raise ValueError(f"opponent_pool.game_seats: {g.num_bodies} bodies in env \"{g.env_name}\" are not "
                                 f"whole games of {seats} seats")
        self.batched = [0 < seats < g.num_bodies for g in self.groups]
        self.loaded = -1
        self.snapshots_taken = 0
        self.next_snapshot = config.refresh_frames

    @property
    def frame(self) -> int:  # type: ignore[override]
        return self.learner.frame

    @frame.setter
    def frame(self, value: int) -> None:
        self.learner.frame = value

    @property
    def opt_step(self) -> int:  # type: ignore[override]
        return self.learner.opt_step

    @opt_step.setter
    def opt_step(self, value: int) -> None:
        self.learner.opt_step = value

    @property
    def last_loss(self) -> float:  # type: ignore[override]
        return self.learner.last_loss

    @last_loss.setter
    def last_loss(self, value: float) -> None:
        self.learner.last_loss = value

    def act(self, group: int, obs: np.ndarray) -> np.ndarray:
        """Learner actions for its seats, frozen-snapshot actions for the frozen seat."""
        rows, mask = self.act_rows[group], self.act_masks[group]
        frozen = self.frozen_rows[group]
        if not (self.training and frozen.any()):
            return self._act_with(self.learner, group, obs, mask, rows)
        own = ~frozen if rows is None else rows & ~frozen
        theirs = frozen if rows is None else rows & frozen
        out = self._act_with(self.learner, group, obs, mask, own) if own.any() else None
        randoms = theirs & self.random_rows[group]
        snapshots = theirs & ~randoms
        if randoms.any():
            out = self._merge(out, self._random_legal(group, obs, mask), randoms)
        if snapshots.any():
            if self.loaded != self.wanted[group]:
                self.frozen.load_state_dict(self.pool[self.wanted[group]])
                self.frozen.set_training(False)
                self.loaded = self.wanted[group]
            out = self._merge(out, np.asarray(self._act_with(self.frozen, group, obs, mask, snapshots)), snapshots)
        return out

    @staticmethod
    def _merge(out: np.ndarray | None, other: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """`other`'s actions in `rows`, `out`'s elsewhere (`other` itself when nothing was chosen yet)."""
        if out is None:
            return other
        return np.where(rows.reshape((-1,) + (1,) * (np.ndim(out) - 1)), other, out)

    def _random_legal(self, group: int, obs: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        """Uniform random legal actions (uniform over the action space without masks) for the frozen seat."""
        space = self.groups[group].action_space
        if mask is not None:
            return random_legal(mask, self.rng)
        return np.stack([space.sample() for _ in range(len(obs))]).astype(space.dtype)

    @staticmethod
    def _act_with(agent: Algorithm, group: int, obs: np.ndarray, mask: np.ndarray | None,
                  rows: np.ndarray | None) -> np.ndarray:
        agent.act_masks[group] = mask
        agent.act_rows[group] = rows
        return agent.act(group, obs)

    def update(self, group: int, transition: Transition) -> None:
        """Pass the learner's own rows on; snapshot on schedule; draw the next game's seats when one ends."""
        frozen = self.frozen_rows[group]
        ended = transition.done if transition.acting is None else transition.done & transition.acting
        if self.training and frozen.any():
            acting = ~frozen if transition.acting is None else transition.acting & ~frozen
            transition = replace(transition, acting=acting)
        if transition.acting is None or transition.acting.any():
            self.learner.update(group, transition)
        if self.learner.frame >= self.next_snapshot:
            self.next_snapshot = self.learner.frame + self.config.refresh_frames
            self.pool.append(copy.deepcopy(self.learner.state_dict()))
            self.snapshots_taken += 1
            self.loaded = -1
            for g, batched in enumerate(self.batched):
                if batched:
                    self.wanted[g] = int(self.rng.integers(len(self.pool)))
        if ended.any():
            self._draw(group, ended)

    def _draw(self, group: int, ended: np.ndarray) -> None:
        """Seats of each ended game's next game: all the learner's, or one seat for a snapshot or random play."""
        frozen, randoms = self.frozen_rows[group], self.random_rows[group]
        seats = self.config.game_seats if self.batched[group] else len(frozen)
        if seats < 2:
            return
        for k in np.unique(np.flatnonzero(ended) // seats).tolist():
            first = k * seats
            frozen[first:first + seats] = False
            randoms[first:first + seats] = False
            u = self.rng.random()
            if u < self.config.random_prob:
                seat = first + int(self.rng.integers(seats))
                frozen[seat] = randoms[seat] = True
            elif self.pool and u < self.config.random_prob + self.config.prob:
                frozen[first + int(self.rng.integers(seats))] = True
                if not self.batched[group]:
                    self.wanted[group] = int(self.rng.integers(len(self.pool)))

    def group_finished(self, group: int) -> None:
        self.learner.group_finished(group)

    def set_training(self, training: bool) -> None:
        """Evaluation plays every seat with the learner."""
        self.training = training
        self.learner.set_training(training)

    def state_dict(self) -> dict[str, Any]:
        """The learner's state plus the pool and its schedule."""
        return {"learner": self.learner.state_dict(), "pool": list(self.pool), "next_snapshot": self.next_snapshot,
                "frame": self.frame, "opt_step": self.opt_step}

    def memory_state_dict(self) -> dict[str, Any]:
        return self.learner.memory_state_dict()

    def load_memory_state_dict(self, state: dict[str, Any]) -> None:
        self.learner.load_memory_state_dict(state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.learner.load_state_dict(state["learner"])
        self.pool = deque(state["pool"], maxlen=self.config.size)
        self.next_snapshot = int(state["next_snapshot"])
        self.loaded = -1
