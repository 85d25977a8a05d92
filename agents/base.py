"""The algorithm interface: act on a batch of observations, update on a batch of transitions.

An agent's bodies are split into groups: the bodies of one agent in one env that share an
observation and an action space. The lab calls `act` and `update` once per group per step with
arrays whose first axis is the group's bodies; (1,1,1) is a group of one body.

Turn-based games and legal-action masks (multi-agent envs) reach `act(group, obs, mask=, acting=)` as
arguments: `mask` (bool (num_bodies, n_actions), True = legal; None when the env gives no masks) and
`acting` (bool (num_bodies,), the bodies whose action the env will use; None when every body acts). Rows
outside `acting` may get any action. `update` then gets a Transition whose `completed` marks the rows that
hold a whole transition of their own (see Transition); an algorithm learns from those rows only.
The whole contract, with a worked example, is docs/write-an-algorithm.md.
"""
# No `from __future__ import annotations` here: classes of this module are subclassed or built elsewhere (dataclass
# and NamedTuple __init__ methods), and string annotations would then resolve only in this module's namespace, not
# where the API reference and typing.get_type_hints read them.

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space

from slm_lab_like.agents.registry import MEMORIES
from slm_lab_like.agents.stats import Stats
from slm_lab_like.array_spaces import ARRAY_SPACES

from slm_lab_like.agents.schedule import schedules_problem


@dataclass(frozen=True)
class BodyGroup:
    """Bodies of one agent in one env with one observation/action signature, acted for in one batch.

    `masked`: the env gives legal-action masks (act's `mask`); `turns`: not every body acts every step (act's
    `acting`, Transition.completed).
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
    obs / next_obs / final_obs, and `completed`: the rows that hold a whole transition of their own this
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
    completed: np.ndarray | None = None

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


def discrete_n(space: gym.Space) -> int:
    """The number of actions of a Discrete space (TypeError for any other, where `space.n` would fail)."""
    if not isinstance(space, gym.spaces.Discrete):
        raise TypeError(f"{type(space).__name__} has no number of actions")
    return int(space.n)


def space_text(space: gym.Space) -> str:
    """A space on one line for messages: Box bounds only when they are the same everywhere."""
    if isinstance(space, gym.spaces.Box) and not (space.low.size and np.all(space.low == space.low.flat[0])
                                                  and np.all(space.high == space.high.flat[0])):
        return f"Box(shape={space.shape}, {space.dtype})"
    return " ".join(str(space).split())


class Algorithm(ABC):
    """Base of every algorithm. Subclasses declare `Config`, a dataclass of their hyperparameters, and what
    they can run on (read by agents.compat before anything is built, and by their own constructors):
    `action_spaces` (the gymnasium space types they act in), `memory_names` (the registered memories they
    learn from, the default first; empty: no memory) and `default_net` (None: no net)."""

    Config: ClassVar[type] = NoConfig
    action_spaces: ClassVar[tuple[type[gym.Space], ...]] = ARRAY_SPACES
    memory_names: ClassVar[tuple[str, ...]] = ()
    default_net: ClassVar[str | None] = None
    takes_masks: ClassVar[bool] = True  # whether it acts within legal-action masks (turn-based games)
    takes_recurrent: ClassVar[bool] = False  # whether it carries a recurrent net's state per body (net.Recurrent)

    @classmethod
    def net_inputs(cls, signatures: Sequence[tuple[gym.Space, gym.Space]]) -> list[list[gym.Space]]:
        """For each kind of net this algorithm builds, the input spaces it is built for (one per signature), from the
        groups' (observation, action) signatures: by default one kind over the observation spaces (an algorithm
        whose nets also take actions says so)."""
        return [[obs for obs, _ in signatures]]

    @classmethod
    def declaration_problem(cls) -> str | None:
        """Why this class's own declarations cannot work (an abstract method left undefined, an `action_spaces` that
        is not space classes, ...), or None: asked first, so a user's class fails at `check` in one line."""
        import inspect

        if inspect.isabstract(cls):
            return f"{cls.__name__} does not define {', '.join(sorted(cls.__abstractmethods__))}"
        spaces = cls.action_spaces
        if not (isinstance(spaces, tuple) and spaces and all(isinstance(t, type) and issubclass(t, gym.Space)
                                                             for t in spaces)):
            return (f"{cls.__name__}.action_spaces is {spaces!r}; expected a tuple of gymnasium space classes, such "
                    "as (gymnasium.spaces.Discrete,)")
        if not (isinstance(cls.memory_names, tuple) and all(isinstance(n, str) for n in cls.memory_names)):
            return f"{cls.__name__}.memory_names is {cls.memory_names!r}; expected a tuple of memory names"
        if cls.default_net is not None and not isinstance(cls.default_net, str):
            return f"{cls.__name__}.default_net is {cls.default_net!r}; expected a net name or None"
        if not isinstance(cls.takes_masks, bool):
            return f"{cls.__name__}.takes_masks is {cls.takes_masks!r}; expected True or False"
        return None

    @classmethod
    def signatures_problem(cls, signatures: Sequence[tuple[gym.Space, gym.Space]]) -> str | None:
        """Why this algorithm cannot run on its body groups' (observation space, action space) signatures taken
        together (one per group: several envs, several blocks), beyond each action space, or None (the default)."""
        return None

    @classmethod
    def action_problem(cls, space: gym.Space) -> str | None:
        """Why this algorithm cannot act in `space` (one line), or None."""
        if isinstance(space, cls.action_spaces):
            return None
        kinds = [t.__name__ for t in cls.action_spaces]
        expected = kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " or " + kinds[-1]
        return f"{cls.__name__} takes {expected} actions; got {space_text(space)}"

    @classmethod
    def memory_problem(cls, name: str | None) -> str | None:
        """Why this algorithm cannot learn from the memory named `name` (None: the default), or None: it learns from
        the memories of `memory_names` and their subclasses (a user's `module:Class` among them)."""
        if name is not None and not cls.memory_names:
            return f"{cls.__name__} takes no memory; drop the memory block"
        if name is None or name in cls.memory_names:
            return None
        try:
            memory = MEMORIES.get(name)
        except KeyError as e:
            return str(e.args[0])
        if any(issubclass(memory, MEMORIES.get(known)) for known in cls.memory_names):
            return None
        return f"{cls.__name__} learns from {' or '.join(cls.memory_names)} (or a subclass); got {name}"

    @classmethod
    def config_problem(cls, config: Any) -> tuple[str, str] | None:
        """(field, one-line reason) for hyperparameters this algorithm would fail on, or None (base: schedules
        that cannot be evaluated)."""
        return schedules_problem(config)

    @classmethod
    def fit_problem(cls, config: Any, signatures: Sequence[tuple[gym.Space, gym.Space]]) -> tuple[str, str] | None:
        """(field, one-line reason) when hyperparameters that are fine alone cannot work on these body groups'
        (observation space, action space) signatures (asked after config_problem), or None (the default)."""
        return None

    @classmethod
    def has_separate_critic(cls, config: Any, net_config: Any) -> bool:
        """Whether this algorithm, so configured, trains a critic net of its own (one that `net.critic_optim` can
        step apart from the actor); base: no."""
        return False

    @classmethod
    def memory_to_build(cls, memory: ComponentSpec | None) -> str:
        """The memory this algorithm builds for `memory` (its default when None); ValueError if it cannot."""
        name = cls.memory_names[0] if memory is None else memory.name
        problem = cls.memory_problem(name)
        if problem:
            raise ValueError(problem)
        return name

    def __init__(self, config: Any, ctx: AgentContext) -> None:
        self.config = config
        self.ctx = ctx
        self.groups = list(ctx.groups)
        self.training = True
        self.frame = 0
        self.opt_step = 0
        self.last_loss: float = float("nan")
        self.stats = Stats()

    def check_groups(self) -> None:
        """ValueError naming the env when a group's action space is one this algorithm cannot act in."""
        for g in self.groups:
            problem = self.action_problem(g.action_space)
            if problem:
                raise ValueError(f'{problem} (env "{g.env_name}")')

    @abstractmethod
    def act(self, group: int, obs: np.ndarray, mask: np.ndarray | None = None,
            acting: np.ndarray | None = None) -> np.ndarray:
        """Actions for every body of `group`, shape (num_bodies, *action_shape): within `mask` (bool (num_bodies,
        n_actions), True = legal) where the env gives one; only the rows of `acting` (bool (num_bodies,)) are used
        by the env, and only those are observations to learn from (None: every row)."""

    def update(self, group: int, transition: Transition) -> None:
        """Take in one step of `group` (store, and train when the algorithm decides to)."""
        completed = transition.completed
        self.frame += len(transition.reward) if completed is None else int(np.count_nonzero(completed))

    def episodes_ended(self, group: int, rows: np.ndarray) -> None:
        """The bodies `rows` (bool (num_bodies,)) of `group` ended an episode: an agent with a memory per body forgets
        them. `update` says so in training; the lab calls this where it calls no update (evaluation, enjoy)."""

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


