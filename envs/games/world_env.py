"""What the built-in simultaneous-move games (spread, the tag arena) share: PettingZoo's ParallelEnv (an optional
extra) over a numpy world in which every player has the same five moves. A game checks its own arguments and
builds its world (``reset(rng)``, ``render() -> str``); this base seats the players, seeds, resets and renders."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

try:
    from pettingzoo import ParallelEnv

    PETTINGZOO_ERROR: ImportError | None = None
except ImportError as _exc:  # pettingzoo is an optional extra; the worlds work without it
    ParallelEnv = object
    PETTINGZOO_ERROR = _exc

NUM_ACTIONS = 5


def move(agent: str, value: Any) -> int:
    """An action as an int in range(5); ValueError naming the player otherwise."""
    try:
        action = int(value)
    except (TypeError, ValueError):
        action = -1
    if action != value or not 0 <= action < NUM_ACTIONS:
        raise ValueError(f"{agent}: action must be an int in 0..{NUM_ACTIONS - 1}, got {value!r}")
    return action


class WorldParallelEnv(ParallelEnv):
    """A PettingZoo parallel env of ``possible_agents`` in ``self.world`` for ``max_cycles`` steps; a game subclass
    builds the world, seats the players (``_seat``) and says what each observes (``_observe``) and how a step goes."""

    metadata: dict[str, Any]
    world: Any

    def _open(self, game: str, render_mode: str | None) -> None:
        """Refuse without pettingzoo, or with a render mode the game does not have (before the game's own checks)."""
        if PETTINGZOO_ERROR is not None:
            raise ImportError(f"the {game} env needs pettingzoo: pip install 'slm_lab_like[pettingzoo]'"
                              ) from PETTINGZOO_ERROR
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.render_mode = render_mode

    def _seat(self, names: list[str], obs_space: spaces.Space, max_cycles: int) -> None:
        """The players with their spaces (the same objects every call) and no episode started yet."""
        self.possible_agents = names
        self.max_cycles = int(max_cycles)
        act_space = spaces.Discrete(NUM_ACTIONS)
        self.observation_spaces = {a: obs_space for a in names}
        self.action_spaces = {a: act_space for a in names}
        self.agents: list[str] = []
        self.num_cycles = 0
        self.np_random, _ = seeding.np_random(None)

    def observation_space(self, agent: str) -> spaces.Space:
        """The player's observation space (the same object every call)."""
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        """The player's action space (the same object every call)."""
        return self.action_spaces[agent]

    def _observe(self, names: Sequence[str]) -> dict[str, np.ndarray]:
        """Fresh observations of ``names``."""
        raise NotImplementedError

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Place the world (seeded by ``seed``, else the env's running generator) and start an episode."""
        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)
        self.world.reset(self.np_random)
        self.num_cycles = 0
        self.agents = self.possible_agents[:]
        return self._observe(self.agents), {a: {} for a in self.agents}

    def _check_step(self, actions: Mapping[str, Any]) -> None:
        """Refuse a step without live players or with actions for players the game does not have."""
        if not self.agents:
            raise RuntimeError("step() called with no live players; call reset()")
        unknown = [a for a in actions if a not in self.observation_spaces]
        if unknown:
            raise ValueError(f"unknown player {unknown[0]!r}; players: {', '.join(self.possible_agents)}")

    def render(self) -> str | None:
        """The world as text ('ansi' returns it, 'human' prints it); None without a render mode."""
        if self.render_mode is None:
            return None
        return self.world.render()

    def close(self) -> None:
        """Nothing to release; safe to call more than once."""
