"""Game positions that search can copy and play forward: what makes one from a game's env.

A `SearchState` (the protocol lives with the search, in `slm_lab_like.tree_search`) is a position of a turn-based
game of Discrete actions: who is to move, the legal actions, `apply` to play one in place, `copy` to branch, and
every player's `returns` once it is over. A game offers it in one of two ways, found by `search_state(env)`:
- its env (or the env under its wrappers) has `search_state()`: the game's own fast copy (the built-in games);
- otherwise a PettingZoo AEC env is copied whole (`AECState`, `copy_env`): PettingZoo's classic games and any AEC
  env whose state deep-copies.
"""
from __future__ import annotations

import copy
from typing import Any, Sequence

import numpy as np
from gymnasium import spaces

from slm_lab_like.tree_search import SearchState

__all__ = ["AECState", "SearchState", "copy_env", "search_state"]


def copy_env(env: Any) -> Any:
    """A copy of an env and the wrappers around it, attribute by attribute (`copy.deepcopy` of each object's
    __dict__, the wrapped `env` recursed into): a plain deepcopy of PettingZoo's envs rebuilds them from their
    constructor arguments (gymnasium's EzPickle), a new game rather than this position. Spaces are shared, not
    copied: they do not change as a game is played, and copying them would cost more than the position."""
    memo: dict[int, Any] = {}

    def clone(obj: Any) -> Any:
        new = object.__new__(type(obj))
        memo[id(obj)] = new
        for value in vars(obj).values():
            for space in (value.values() if isinstance(value, dict) else (value,)):
                if isinstance(space, spaces.Space):
                    memo[id(space)] = space
        for key, value in vars(obj).items():
            inner = key == "env" and hasattr(value, "__dict__") and id(value) not in memo
            new.__dict__[key] = clone(value) if inner else copy.deepcopy(value, memo)
        return new

    return clone(env)


class AECState:
    """A PettingZoo AEC env as a `SearchState`: each copy is a `copy_env` of the env, rewards summed as played.

    Actions must be Discrete; the legal ones come from the observation's "action_mask" (PettingZoo classic) or
    the action space's whole range.
    """

    def __init__(self, env: Any, totals: Sequence[float] | None = None) -> None:
        self.env = env
        self.players = list(env.possible_agents)
        self.totals = list(totals) if totals is not None else [0.0] * len(self.players)
        self._skip_dead()

    def copy(self) -> AECState:
        return AECState(copy_env(self.env), self.totals)

    def current_player(self) -> int:
        return self.players.index(self.env.agent_selection)

    def legal_actions(self) -> list[int]:
        if self.is_terminal():
            return []
        agent = self.env.agent_selection
        obs = self.env.observe(agent)
        if isinstance(obs, dict) and "action_mask" in obs:
            return np.flatnonzero(obs["action_mask"]).tolist()
        space = self.env.action_space(agent)
        if not isinstance(space, spaces.Discrete):
            raise ValueError(f"search needs Discrete actions; {agent} has {space}")
        return list(range(int(space.start), int(space.start + space.n)))

    def apply(self, action: int) -> None:
        self.env.step(int(action))
        for a, r in self.env.rewards.items():
            self.totals[self.players.index(a)] += float(r)
        self._skip_dead()

    def is_terminal(self) -> bool:
        env = self.env
        return not env.agents or all(env.terminations[a] or env.truncations[a] for a in env.agents)

    def observation(self) -> Any:
        """The player to move's observation, as the env gives it."""
        return self.env.observe(self.env.agent_selection)

    def returns(self) -> list[float]:
        return list(self.totals)

    def _skip_dead(self) -> None:
        """Step out the agents that are done while others play on (AEC's dead steps), so the mover is live."""
        env = self.env
        while env.agents and not self.is_terminal():
            agent = env.agent_selection
            if not (env.terminations[agent] or env.truncations[agent]):
                return
            env.step(None)


def search_state(env: Any) -> SearchState:
    """A copy of `env`'s position to search from: the game's own `search_state()` where it (or an env under its
    wrappers) has one, else a deep copy of the AEC env; ValueError when neither applies."""
    inner = env
    while inner is not None:
        make = getattr(type(inner), "search_state", None)
        if callable(make):
            return inner.search_state()
        inner = getattr(inner, "env", None)
    if not hasattr(env, "agent_selection"):
        raise ValueError(f"{type(env).__name__} is not a turn-based (AEC) game and has no search_state(): search "
                         "players cannot copy its position")
    try:
        return AECState(copy_env(env))
    except Exception as e:  # noqa: BLE001  (any way an env fails to copy is this one-line error)
        raise ValueError(f"{type(env).__name__} cannot be copied for search: {type(e).__name__}: {e}") from None
