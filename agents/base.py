"""The algorithm interface: act on a batch of observations, update on a batch of transitions.

An agent's bodies are split into groups: the bodies of one agent in one env that share an
observation and an action space. The lab calls `act` and `update` once per group per step with
arrays whose first axis is the group's bodies; (1,1,1) is a group of one body.

Turn-based games and legal-action masks (multi-agent envs): before `act(group, obs)` the lab sets
`self.act_masks[group]` (bool (num_bodies, n_actions), True = legal; None when the env gives no masks)
and `self.act_rows[group]` (bool (num_bodies,), the bodies whose action the env will use; None when
every body acts); read them through `action_mask(group)` / `acting_rows(group)`. Rows outside
`act_rows` may get any action. `update` then gets a Transition whose `acting` marks the rows that hold
a whole transition of their own (see Transition); an algorithm learns from those rows only.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space


@dataclass(frozen=True)
class BodyGroup:
    """Bodies of one agent in one env with one observation/action signature, acted for in one batch.

    `masked`: the env gives legal-action masks (see Algorithm.action_mask); `turns`: not every body acts
    every step (see Algorithm.acting_rows and Transition.acting).
    """

    index: int
    env_index: int
    env_name: str
    observation_space: gym.Space
    action_space: gym.Space
    num_bodies: int
    body_coords: tuple[tuple[int, int, int], ...] = ()
    masked: bool = False
    turns: bool = False

    @property
    def batch_observation_space(self) -> gym.Space:
        """The observation space of the whole group (first axis: bodies)."""
        return batch_space(self.observation_space, self.num_bodies)

    @property
    def batch_action_space(self) -> gym.Space:
        """The action space of the whole group (first axis: bodies)."""
        return batch_space(self.action_space, self.num_bodies)


@dataclass
class Transition:
    """One step of a group. Arrays are views into the lab's buffers: copy what you keep.

    next_obs of a body whose episode just ended is already the first observation of its next
    episode; the last observation of the ended episode is in final_obs (rows valid where
    terminated | truncated), so value bootstrapping on truncation stays correct.

    Multi-agent envs may add: action_mask / next_action_mask / final_action_mask (bool, True = legal) for
    obs / next_obs / final_obs, and `acting`: the rows that hold a whole transition of their own this
    step (None: every row). In a turn-based game a body's row is filled at the step where its next turn
    comes (or its episode ends): obs and action of its last turn, the reward summed over every move since
    (the opponent's winning move included), next_obs at its next turn. Other rows are to be ignored.
    """

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: np.ndarray
    action_mask: np.ndarray | None = None
    next_action_mask: np.ndarray | None = None
    final_action_mask: np.ndarray | None = None
    acting: np.ndarray | None = None

    @property
    def done(self) -> np.ndarray:
        return self.terminated | self.truncated

    def bootstrap_action_mask(self) -> np.ndarray | None:
        """Legal actions at bootstrap_obs(): final_action_mask where the episode ended, else next_action_mask."""
        if self.next_action_mask is None or self.final_action_mask is None:
            return self.next_action_mask
        done = self.done
        return np.where(done[:, None], self.final_action_mask, self.next_action_mask) if done.any() else self.next_action_mask

    def bootstrap_obs(self) -> np.ndarray:
        """The true next observation of each body: final_obs where its episode ended, else next_obs."""
        done = self.done
        if not done.any():
            return self.next_obs
        mask = done.reshape((-1,) + (1,) * (self.next_obs.ndim - 1))
        return np.where(mask, self.final_obs, self.next_obs)


@dataclass(frozen=True)
class ComponentSpec:
    """A named, validated part of an agent spec (a memory or a net): its registry name and config."""

    name: str
    config: Any = None


@dataclass
class AgentContext:
    """What an algorithm is built with besides its own config."""

    groups: Sequence[BodyGroup]
    seed: int
    memory: ComponentSpec | None = None
    net: ComponentSpec | None = None
    name: str = "agent"


@dataclass
class NoConfig:
    """Config of an algorithm without hyperparameters."""


class Algorithm(ABC):
    """Base of every algorithm. Subclasses declare `Config`, a dataclass of their hyperparameters."""

    Config: ClassVar[type] = NoConfig

    def __init__(self, config: Any, ctx: AgentContext) -> None:
        self.config = config
        self.ctx = ctx
        self.groups = list(ctx.groups)
        self.training = True
        self.frame = 0
        self.opt_step = 0
        self.last_loss: float = float("nan")
        self.act_masks: list[np.ndarray | None] = [None] * len(self.groups)
        self.act_rows: list[np.ndarray | None] = [None] * len(self.groups)

    def action_mask(self, group: int) -> np.ndarray | None:
        """Legal actions of `group`'s bodies for the coming act call (bool, True = legal), or None."""
        return self.act_masks[group]

    def acting_rows(self, group: int) -> np.ndarray | None:
        """Bodies of `group` whose action the env uses at the coming step (bool), or None when all do."""
        return self.act_rows[group]

    @abstractmethod
    def act(self, group: int, obs: np.ndarray) -> np.ndarray:
        """Actions for every body of `group`, shape (num_bodies, *action_shape)."""

    def update(self, group: int, transition: Transition) -> None:
        """Take in one step of `group` (store, and train when the algorithm decides to)."""
        acting = transition.acting
        self.frame += len(transition.reward) if acting is None else int(np.count_nonzero(acting))

    def group_finished(self, group: int) -> None:
        """Called once when the env of `group` has spent its budget; the group will not act again."""

    def set_training(self, training: bool) -> None:
        """Switch between training (exploring, learning) and evaluation (greedy, frozen)."""
        self.training = training

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume this agent: networks, optimisers, normalisers, schedules."""
        return {"frame": self.frame, "opt_step": self.opt_step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what state_dict returned."""
        self.frame = int(state["frame"])
        self.opt_step = int(state["opt_step"])

    def memory_state_dict(self) -> dict[str, Any]:
        """The agent's replay memories (tensors and plain values), for checkpoints that keep them; {} when
        it has nothing worth keeping (on-policy rollouts are dropped on load anyway)."""
        return {}

    def load_memory_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what memory_state_dict returned."""


