"""What the lab steps: an env with numbered body slots, batched buffers, a clock and a budget.

Slots with one observation/action signature form a SlotBlock whose arrays have the slots on the first
axis. Observations are double-buffered (`obs[parity]` now, `obs[1 - parity]` after the step), so the
lab hands agents views, never copies, and a transition's obs and next_obs are both still valid.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from slm_lab_like.array_spaces import ARRAY_SPACES, space_shape
from slm_lab_like.envs.episodes import EpisodeEnds, EpisodeTape



def _empty(space: gym.Space, n: int, where: str) -> np.ndarray:
    if not isinstance(space, ARRAY_SPACES):
        raise ValueError(f"{where}: {type(space).__name__} spaces are not supported by the lab's buffers; "
                         "flatten it (gymnasium.wrappers.FlattenObservation) or use an array space")
    return np.zeros((n,) + space_shape(space), dtype=space.dtype)


class SlotBlock:
    """Buffers for slots [start, stop) of an env that share one observation and one action space."""

    def __init__(self, start: int, stop: int, observation_space: gym.Space, action_space: gym.Space, where: str) -> None:
        n = stop - start
        self.start, self.stop = start, stop
        self.observation_space, self.action_space = observation_space, action_space
        self.obs = (_empty(observation_space, n, where), _empty(observation_space, n, where))
        self.final_obs = _empty(observation_space, n, where)
        self.action = _empty(action_space, n, where)
        self.reward = np.zeros(n, dtype=np.float32)
        self.terminated = np.zeros(n, dtype=bool)
        self.truncated = np.zeros(n, dtype=bool)
        self.action_mask: tuple[np.ndarray, np.ndarray] | None = None
        self.final_action_mask: np.ndarray | None = None
        self.acting: tuple[np.ndarray, np.ndarray] | None = None
        self.completed: np.ndarray | None = None
        self.next_step = False  # slots reset a step after their episode ends: see final_of and completed_of

    def final_of(self, parity: int) -> np.ndarray:
        """The final observations of the step taken from obs[parity] (rows where an episode ended): `final_obs`,
        or, where slots reset only at the next step (`next_step`, gymnasium's NEXT_STEP), that step's next obs."""
        return self.obs[1 - parity] if self.next_step else self.final_obs

    def completed_of(self, parity: int) -> np.ndarray | None:
        """The rows holding a whole transition after the step taken from obs[parity]: `completed`, or, where slots
        reset only at the next step (`next_step`), the rows that acted in it."""
        if self.next_step and self.acting is not None:
            return self.acting[parity]
        return self.completed

    @property
    def size(self) -> int:
        return self.stop - self.start

    def add_action_masks(self, n_actions: int) -> None:
        """Allocate legal-action masks, double-buffered like obs: `action_mask[parity]` belongs to `obs[parity]`."""
        n = self.size
        self.action_mask = (np.zeros((n, n_actions), dtype=bool), np.zeros((n, n_actions), dtype=bool))
        self.final_action_mask = np.zeros((n, n_actions), dtype=bool)

    def add_turns(self) -> None:
        """Allocate turn flags for envs where not every slot acts every step (turn-based games, done players).

        `acting[parity]` marks the slots whose action the env uses at the coming step; after a step,
        `completed` marks the slots whose row of the step's buffers is a whole transition of their own
        (obs where they acted, that action, the reward gathered since, next obs where they act next).
        """
        n = self.size
        self.acting = (np.zeros(n, dtype=bool), np.zeros(n, dtype=bool))
        self.completed = np.zeros(n, dtype=bool)

    def turn_flags(self) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
        """`acting` and `completed` of a block that has them (`add_turns`): for envs that always allocate them."""
        if self.acting is None or self.completed is None:
            raise ValueError("this block has no turn flags (SlotBlock.add_turns)")
        return self.acting, self.completed

    def mask_buffers(self) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
        """`action_mask` and `final_action_mask` of a block that has them (`add_action_masks`)."""
        if self.action_mask is None or self.final_action_mask is None:
            raise ValueError("this block has no legal-action masks (SlotBlock.add_action_masks)")
        return self.action_mask, self.final_action_mask


@dataclass
class Clock:
    """An env's own time: frames (body-steps) and episodes so far, against its budget."""

    max_frame: int | None = None
    max_episode: int | None = None
    frame: int = 0
    epi: int = 0
    target_reached: bool = False

    @property
    def done(self) -> bool:
        """True once the env has spent its budget (or its agents reached the spec's target_return)."""
        return self.target_reached or (self.max_frame is not None and self.frame >= self.max_frame) or (
            self.max_episode is not None and self.epi >= self.max_episode)


class LabEnv(ABC):
    """An env as the lab sees it: `n_slots` body slots in `blocks`, stepped all at once."""

    tape: EpisodeTape | None = None  # envs that keep their episodes on a tape set it
    held: EpisodeEnds | None = None  # envs that hold back the ends they append, each with its env frame, set it

    def __init__(self, name: str, clock: Clock, blocks: list[SlotBlock]) -> None:
        self.name = name
        self.clock = clock
        self.blocks = blocks
        self.parity = 0
        self.ended = EpisodeEnds()

    def flush_ends(self) -> EpisodeEnds:
        """`ended`, holding every episode finished so far: an env that keeps its episodes on an EpisodeTape (read off
        in batches) or holds them back (`held`) moves the unread ones there first."""
        if self.tape is not None:
            self.tape.flush()
        if self.held is not None:
            self.held.move_to(self.ended)
        return self.ended

    @property
    def holds_ends(self) -> bool:
        """Whether the env's ends reach `ended` in batches (every few dozen steps, or at `flush_ends`)."""
        return self.tape is not None or self.held is not None

    @property
    def n_slots(self) -> int:
        return sum(b.size for b in self.blocks)

    @abstractmethod
    def reset(self, seed: int | None = None) -> None:
        """Start every slot's first episode; observations land in `block.obs[parity]`."""

    @abstractmethod
    def step(self) -> None:
        """Step every slot with `block.action`; write next obs to `block.obs[1 - parity]`, flip parity,
        tick the clock, and add every finished episode to `ended` (auto-resetting its slot)."""

    @abstractmethod
    def close(self) -> None:
        """Release the env's resources; safe to call twice."""

    @property
    def slot_frames(self) -> list[int]:
        """Each slot's own frames so far; an equal share of the clock where every slot acts every step."""
        return [self.clock.frame // self.n_slots] * self.n_slots

    @property
    def dropped_episodes(self) -> int:
        """Episodes cut by a fault outside the env (a lost judge) and dropped rather than recorded."""
        return 0

    def restore_slot_frames(self, frames: list[int]) -> None:
        """Take each slot's frames from a checkpoint (envs that count them per slot keep them; the clock,
        restored by the caller, covers the rest)."""

    def render(self) -> object:
        """A picture of the env's first body (what its render mode gives), for watching a run."""
        raise NotImplementedError(f"env {self.name} does not render")
