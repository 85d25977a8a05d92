"""Tournament players: what sits at a seat of one game and answers `act(obs)` with an action.

A `Player` is made once per tournament (a checkpoint's agent is loaded once); `seat(...)` gives what plays one
game from one seat: a scripted policy made fresh with the game's seed, the checkpoint's agent acting greedily,
or a submission in its own subprocess (slm_lab_like.remote.seat). Observations are the game's own (PettingZoo
classic style: a dict of "observation" and "action_mask" where the game has masks).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from slm_lab_like.agents.base import Algorithm
from slm_lab_like.agents.checkpoint import load_agent
from slm_lab_like.agents.scripted import load_policy
from slm_lab_like.agents.selfplay import OpponentPool
from slm_lab_like.aeb.space import AEBSpace
from slm_lab_like.spec.load import spec_of_run
from slm_lab_like.remote.seat import SubmissionSeat
from slm_lab_like.spec.schema import PlayerSpec, TournamentConfig
from slm_lab_like.spec.tournament import RANDOM, agent_file


class Seat(Protocol):
    """One player at one seat of one game."""

    def act(self, obs: Any) -> Any: ...

    def close(self, obs: Any = None, reward: float = 0.0) -> None: ...


def split(obs: Any) -> tuple[Any, np.ndarray | None]:
    """(observation, legal-action mask or None) of a game observation."""
    if isinstance(obs, dict) and "action_mask" in obs:
        return obs["observation"], np.asarray(obs["action_mask"]).astype(bool)
    return obs, None


def one_row(observation: Any, shape: tuple[int, ...] | None) -> np.ndarray:
    """One observation as a float32 batch of one row of the agent's observation shape."""
    return np.asarray(observation, dtype=np.float32).reshape((1,) + tuple(shape or (-1,)))


class RandomPolicy:
    """Uniform random legal actions (uniform over the action space without a mask)."""

    def __init__(self, action_space: gym.Space, seed: int) -> None:
        self.space = action_space
        self.rng = np.random.default_rng(seed)
        self.space.seed(seed)

    def __call__(self, obs: Any) -> Any:
        _, mask = split(obs)
        if mask is not None:
            legal = np.flatnonzero(mask)
            return int(legal[self.rng.integers(len(legal))])
        return self.space.sample()


class PolicySeat:
    """A seat played by a plain callable (scripted players, random play, a checkpoint's greedy agent)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    def bind_game(self, env: Any) -> None:
        """Hand the game to a policy that searches from its position (slm_lab_like.envs.mcts.MCTSPlayer)."""
        bind = getattr(self.policy, "bind_game", None)
        if callable(bind):
            bind(env)

    def act(self, obs: Any) -> Any:
        return self.policy(obs)

    def close(self, obs: Any = None, reward: float = 0.0) -> None:
        """Nothing to stop."""


class AgentPolicy:
    """A lab agent acting greedily for one observation at a time, as the first body of its group 0 (its first env's
    bodies: the group's other rows repeat the observation and do not act, so an agent with a memory per body keeps
    that body's); `new_game` makes it forget."""

    def __init__(self, agent: Algorithm) -> None:
        self.agent = agent
        self.shape = agent.groups[0].observation_space.shape
        self.acting = np.zeros(agent.groups[0].num_bodies, dtype=bool)
        self.acting[0] = True

    def new_game(self) -> None:
        self.agent.episodes_ended(0, np.ones(len(self.acting), dtype=bool))

    def __call__(self, obs: Any) -> Any:
        observation, mask = split(obs)
        x = one_row(observation, self.shape)
        n = len(self.acting)
        action = np.asarray(self.agent.act(0, np.repeat(x, n, axis=0),
                                           mask=None if mask is None else np.repeat(np.asarray(mask)[None], n, axis=0),
                                           acting=self.acting))[0]
        return int(action) if action.ndim == 0 else action


def searched(agent: Algorithm) -> Algorithm:
    """What search at play time evaluates: the agent, or the learner of an opponent pool."""
    return agent.learner if isinstance(agent, OpponentPool) else agent


class SearchingAgent:
    """A checkpoint's agent choosing each move by PUCT search over its own policy and value heads (AlphaZero's play),
    from copies of the bound game's position; a two-player zero-sum game, the value being the mover's."""

    def __init__(self, agent: Algorithm, simulations: int, c_puct: float, seed: int) -> None:
        from slm_lab_like.tree_search import MCTS

        self.agent = agent
        self.shape = agent.groups[0].observation_space.shape
        self.mcts = MCTS(simulations, seed=seed, evaluator=self.evaluate, c_puct=c_puct)
        self.env: Any = None

    def bind_game(self, env: Any) -> None:
        self.env = env

    def evaluate(self, state: Any) -> tuple[dict[int, float], list[float]]:
        """The agent's priors over the legal moves of `state` and its value for the player to move (minus it for the
        other)."""
        observation, mask = split(state.observation())
        x = one_row(observation, self.shape)
        probs, values = self.agent.policy_value(0, x, None if mask is None else np.asarray(mask)[None])  # type: ignore[attr-defined]
        legal = state.legal_actions()
        mover, v = state.current_player(), float(values[0])
        returns = [-v] * len(state.returns())
        returns[mover] = v
        return {a: float(probs[0, a]) for a in legal}, returns

    def __call__(self, obs: Any) -> Any:
        from slm_lab_like.envs.search import search_state

        if self.env is None:
            raise ValueError("a searching checkpoint player plays in tournaments, which hand it the game")
        return self.mcts.search(search_state(self.env))


class Player:
    """A tournament player as its spec describes it; `seat(...)` makes what plays one game."""

    def __init__(self, spec: PlayerSpec, config: TournamentConfig) -> None:
        self.spec = spec
        self.name = spec.name
        self.config = config
        self.kind = next(k for k in ("scripted", "checkpoint", "submission") if getattr(spec, k) is not None)
        self.policy: Any = None
        self.make: Any = None  # a scripted player's maker(seed=...)
        self.space: AEBSpace | None = None
        if self.kind == "scripted" and spec.scripted != RANDOM:
            self.make = load_policy(str(spec.scripted), spec.kwargs)  # once, not per game
        if self.kind == "checkpoint":
            self.policy = AgentPolicy(self._load_agent())
            if spec.search is not None and not hasattr(searched(self.policy.agent), "policy_value"):
                raise ValueError(f'player "{spec.name}": its agent ({type(searched(self.policy.agent)).__name__}) has '
                                 "no policy and value heads to search over")

    def _load_agent(self) -> Algorithm:
        """The checkpoint's agent (its final state or a kept checkpoint's, or a snapshot of its opponent pool), greedy
        and frozen."""
        session = Path(str(self.spec.checkpoint))
        record = json.loads((session.parent / "spec.json").read_text())
        spec = spec_of_run(record["spec"], play=True)
        index = 0 if self.spec.agent is None else [a.name for a in spec.agent].index(self.spec.agent)
        self.space = AEBSpace.build(spec, int(record["seeds"][0]))
        agent = self.space.agent_space.agents[index]
        path = agent_file(session, index, self.spec.frame)
        assert path is not None  # checked by the spec
        load_agent(agent, path)
        if self.spec.snapshot is not None:
            if not isinstance(agent, OpponentPool):
                raise ValueError(f"{session}: agent {index} has no opponent pool to take snapshot {self.spec.snapshot} "
                                 "from")
            agent.learner.load_state_dict(agent.pool[self.spec.snapshot])
        agent.set_training(False)
        return agent

    def seat(self, seed: int, observation_space: gym.Space, action_space: gym.Space) -> Seat:
        """What plays one game from one seat; `seed` seeds a scripted or random player."""
        if self.kind == "submission":
            return SubmissionSeat(str(self.spec.submission), observation_space, action_space,
                                  move_time_limit=self.config.move_time_limit,
                                  startup_timeout=self.config.startup_timeout)
        if self.kind == "checkpoint":
            self.policy.new_game()  # games are played one at a time
            if self.spec.search is not None:
                return PolicySeat(SearchingAgent(searched(self.policy.agent), self.spec.search.simulations,
                                                 self.spec.search.c_puct, seed))
            return PolicySeat(self.policy)
        if self.spec.scripted == RANDOM:
            return PolicySeat(RandomPolicy(action_space, seed))
        return PolicySeat(self.make(seed=seed))

    def close(self) -> None:
        """Free a checkpoint's space."""
        if self.space is not None:
            self.space.close()
            self.space = None
