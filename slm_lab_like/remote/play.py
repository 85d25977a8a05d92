"""How a multi-agent judge plays its PettingZoo env: all players at once (parallel) or turn by turn (AEC).

A play object talks only to the env, never to clients. The judge asks it which agents must act next
(:meth:`movers`), hands it their actions (:meth:`step`) and gets back :class:`Event` s: an agent that can be
answered now, with its observation, the reward it got since it last heard, its flags and its info.

- :class:`ParallelPlay`: every live agent acts in every step and every one hears back after it.
- :class:`TurnPlay`: the env is not converted; one agent moves at a time and hears back when it is its turn
  again (PettingZoo's ``last()``: its own observation and the cumulative reward since it last acted, so the
  opponent's moves count, the winning one included) or when its game ends. Finished agents are stepped out
  with ``None`` as PettingZoo requires.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from gymnasium import spaces

from slm_lab_like.remote import protocol as P

logger = logging.getLogger(__name__)

APIS = ("aec", "parallel")


Event = tuple
"""What one agent is told, as ``(agent, obs, reward, terminated, truncated, info)``: its observation, the reward
since it last heard, its flags and its info (a dict)."""


def env_api(env: Any) -> str:
    """"aec" for a PettingZoo AECEnv, "parallel" for anything else (a ParallelEnv, or one written in its style)."""
    try:
        from pettingzoo import AECEnv
    except ImportError:
        return "parallel"
    return "aec" if isinstance(env, AECEnv) else "parallel"


def make_play(env: Any, api: str | None = None) -> ParallelPlay | TurnPlay:
    """The play object for ``env``: ``api`` when given ("aec" or "parallel"), else the env's own kind.

    An env that does not subclass ``pettingzoo.AECEnv`` is played in parallel unless ``api="aec"`` says otherwise.
    """
    if api not in (None, *APIS):
        raise ValueError(f'api must be "aec" or "parallel", got {api!r}')
    found = env_api(env)
    if api == "parallel" and found == "aec":
        raise ValueError(f"{type(env).__name__} is a PettingZoo AEC env, not parallel")
    return TurnPlay(env) if (api or found) == "aec" else ParallelPlay(env)


def _info(info: Any) -> dict:
    """The info of one agent, or {} when the env gave none (or no dict)."""
    return info if isinstance(info, dict) else {}


class ParallelPlay:
    """Simultaneous moves: a step needs every live agent's action and answers every one of them."""

    api = "parallel"

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(self, seed: int | None, options: dict | None) -> tuple[list, list[Event]]:
        """New episode: the agents in it and each one's first observation."""
        obs, infos = self.env.reset(seed=seed, options=options)
        infos = infos or {}
        agents = list(self.env.agents)
        return agents, [(a, obs[a], 0.0, False, False, _info(infos.get(a))) for a in agents]

    def agents(self) -> list:
        """Agents still in the episode (the env's own list: read it, do not keep it)."""
        return self.env.agents

    def movers(self) -> list:
        """Agents whose actions the next step needs (the env's own list: read it, do not keep it)."""
        return self.env.agents

    def fallback(self, agent: Any, null: Any) -> Any:
        """The action played for an absent or finished agent: its null action."""
        return null

    def step(self, actions: dict) -> list[Event]:
        """Step every agent at once; each of them hears back."""
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        events = []
        for a in actions:
            o = obs.get(a)
            if o is None:
                o = P.null_action(self.env.observation_space(a))
            events.append((a, o, float(rewards.get(a, 0.0)), bool(terms.get(a, False)), bool(truncs.get(a, False)),
                           _info(infos.get(a))))
        return events


class TurnPlay:
    """Turn-based moves (PettingZoo AEC, not converted): a step needs the selected agent's action only."""

    api = "aec"

    def __init__(self, env: Any) -> None:
        self.env = env
        self._open: set = set()
        self._seen: dict[Any, Any] = {}

    def reset(self, seed: int | None, options: dict | None) -> tuple[list, list[Event]]:
        """New game: the agents in it, and the view of the first to move (and of any finished at once)."""
        self.env.reset(seed=seed, options=options)
        agents = list(self.env.agents)
        self._open, self._seen = set(agents), {}
        return agents, self._arrive()

    def agents(self) -> list:
        """Agents still in the game."""
        return list(self.env.agents)

    def movers(self) -> list:
        """The selected agent, when the game goes on."""
        env = self.env
        if not env.agents or self._dead(env.agent_selection):
            return []
        return [env.agent_selection]

    def fallback(self, agent: Any, null: Any) -> Any:
        """The null action, or the lowest legal one when the observation's action mask forbids it."""
        space = self.env.action_space(agent)
        obs = self.env.observe(agent)
        mask = obs.get("action_mask") if isinstance(obs, dict) else None
        if mask is None:
            mask = (self.env.infos.get(agent) or {}).get("action_mask")
        if mask is None or not isinstance(space, spaces.Discrete):
            return null
        mask = np.asarray(mask).reshape(-1)
        index = int(null) - int(space.start)
        if 0 <= index < mask.size and mask[index]:
            return null
        legal = np.flatnonzero(mask)
        return space.dtype.type(int(legal[0]) + int(space.start)) if legal.size else null

    def step(self, actions: dict) -> list[Event]:
        """Play the selected agent's action, then read who is next."""
        self.env.step(actions[self.env.agent_selection])
        return self._arrive()

    def _dead(self, agent: Any) -> bool:
        env = self.env
        return bool(env.terminations.get(agent, False) or env.truncations.get(agent, False))

    def _arrive(self) -> list[Event]:
        """Read the selected agent's view (``last()``): a finished agent is told and stepped out with None, until
        one that moves is selected; when the game is over, every agent not yet told hears its end."""
        env, events = self.env, []
        for _ in range(len(env.possible_agents) + 1):
            if not env.agents:
                break
            agent = env.agent_selection
            obs, reward, terminated, truncated, info = env.last()
            obs = self._seen[agent] = P.fresh_copy(obs)  # an answer may wait for later moves: keep this view as it is
            events.append((agent, obs, float(reward), bool(terminated), bool(truncated), dict(_info(info))))
            if not (terminated or truncated):
                return events
            self._open.discard(agent)
            env.step(None)
        return events + self._untold_ends()

    def _untold_ends(self) -> list[Event]:
        """Ends for agents the game left without telling them (no last selection): terminated, last view seen."""
        events = []
        for agent in sorted(self._open, key=str):
            logger.warning("judge: %s left the game without a last turn; telling it the game ended", agent)
            obs = self._seen.get(agent)
            if obs is None:
                obs = P.null_action(self.env.observation_space(agent))
            events.append((agent, obs, 0.0, True, False, {"reason": "left_the_game"}))
        self._open.clear()
        return events
