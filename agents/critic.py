"""A centralized critic for the policy-gradient family (MAPPO-style): spec `algorithm.critic: "central"`.

Actors see their own body's observation. The critic of a body sees its *team*: every body of the env the body
is in (the env's players, whichever agents own them), and is trained on the team's return.

Critic input of the body in slot i of an env with n slots (the layout the unit tests pin down):

    [obs of slot 0 | obs of slot 1 | ... | obs of slot n-1 | one-hot(i) of width n]     width n * d + n

each obs flattened (d = its size), in the env's slot order (the order of `DataSpace.by_env`), so the input is
the same for every body of the env except the one-hot body id, which lets bodies that share one critic (an
agent with several bodies in the env: parameter sharing) get their own values. Agents of one team that each
own some of the env's bodies each keep their own central critic over the same joint observation.

Team reward: at each step every body of a group learns from the mean reward of the env's bodies that completed
a transition that step, so advantages are the team's (in a shared-reward env, such as `spread`, this is each
body's own reward). A body's value is V(joint observation, body id); truncated episodes bootstrap from the
joint observation where every ended body's row is its final observation.

The joint observation is read where the env writes it: `DataSpace.by_env(e, "obs", parity).array`, the env's
whole (n_slots, *obs_shape) observation buffer at that parity, one zero-copy array per env and step (an env
whose bodies share one observation space keeps them in one SlotBlock). The lab builds agents with a
`TeamContext` (a `Team` per group) and, before each act and update of a group, sets the group's current
`TeamView` (the views of that obs parity) in `team_now`; nothing of this runs for agents without the option.

A central critic needs an env whose bodies share one world (a multi-agent env), move simultaneously (a PettingZoo
parallel env, not a turn-based one, whose transitions span other bodies' moves) and see one observation space;
`team_problem` says why an env is not one.
"""
# No `from __future__ import annotations` here: classes of this module are subclassed or built elsewhere (dataclass
# and NamedTuple __init__ methods), and string annotations would then resolve only in this module's namespace, not
# where the API reference and typing.get_type_hints read them.

from dataclasses import dataclass
from typing import NamedTuple, Sequence

import gymnasium as gym
import numpy as np
import torch

from slm_lab_like.agents.base import AgentContext, space_text
from slm_lab_like.agents.normalizer import ObsNormalizer
from slm_lab_like.array_spaces import space_shape

CRITICS = ("own", "central")


@dataclass(frozen=True)
class TeamView:
    """One obs parity of an env as a central critic reads it: views of the env's whole buffers (first axis: the
    env's slots). `obs` is the joint observation the bodies act on; after the step `next_obs`, `final_obs`
    (valid where a body's episode ended), `reward`, `terminated`, `truncated` and `completed` (the rows that
    hold a transition, None when every row does) describe it."""

    obs: np.ndarray
    next_obs: np.ndarray
    final_obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    completed: np.ndarray | None = None

    def team_reward(self) -> float:
        """The mean reward of the bodies that completed a transition this step (all of them without turns)."""
        if self.completed is None:
            return float(self.reward.mean())
        done = self.completed
        n = int(np.count_nonzero(done))
        return float(self.reward[done].sum() / n) if n else 0.0

    def bootstrap_obs(self) -> np.ndarray:
        """The joint observation to bootstrap from after this step: final_obs rows where a body's episode ended,
        next_obs rows elsewhere (a copy only when some episode ended)."""
        done = self.terminated | self.truncated
        if not done.any():
            return self.next_obs
        return np.where(done.reshape((-1,) + (1,) * (self.next_obs.ndim - 1)), self.final_obs, self.next_obs)


@dataclass(frozen=True)
class Team:
    """The team of one body group: the env's `size` bodies, of which the group holds slots [lo, hi), each seeing
    `observation_space`; `views[parity]` are the env's buffers at each obs parity."""

    env_name: str
    size: int
    lo: int
    hi: int
    observation_space: gym.Space
    views: tuple[TeamView, TeamView]

    @property
    def obs_size(self) -> int:
        return int(np.prod(space_shape(self.observation_space)))

    @property
    def input_space(self) -> gym.spaces.Box:
        """The critic's input space: n * d joint features then the n-wide body id."""
        return critic_space(self.observation_space, self.size)


@dataclass
class TeamContext(AgentContext):
    """An AgentContext with each group's Team (None for groups of agents without a central critic)."""

    teams: Sequence[Team | None] = ()


def critic_space(observation_space: gym.Space, n: int) -> gym.spaces.Box:
    """The input space of a central critic over `n` bodies that each see `observation_space`."""
    d = int(np.prod(space_shape(observation_space)))
    return gym.spaces.Box(-np.inf, np.inf, (n * d + n,), np.float32)


class TeamEnv(NamedTuple):
    """What decides whether an env's bodies can be one team: its name, whether its bodies are players of one
    multi-agent env (not copies of a single-agent env, nor bodies of separate games), whether it is turn-based,
    and the observation spaces of its bodies' blocks."""

    name: str
    shared_world: bool
    turn_based: bool
    observation_spaces: Sequence[gym.Space]


def team_problem(env: TeamEnv) -> str | None:
    """Why the bodies of an env cannot be one team for a central critic (one line), or None."""
    env_name = env.name
    if not env.shared_world:
        return (f'critic "central" needs a multi-agent env whose bodies share one world; "{env_name}" is not one '
                '(its bodies are separate copies or games); use critic "own"')
    if env.turn_based:
        return (f'critic "central" needs an env whose bodies move simultaneously; "{env_name}" is turn-based; '
                'use critic "own"')
    distinct: list[gym.Space] = []
    for space in env.observation_spaces:
        if not any(space == d for d in distinct):
            distinct.append(space)
    if len(distinct) > 1:
        return (f'critic "central" needs every body of env "{env_name}" to see one observation space; got '
                f'{len(distinct)}: {", ".join(space_text(s) for s in distinct)}')
    if distinct and not isinstance(distinct[0], gym.spaces.Box):
        return f'critic "central" needs Box observations; env "{env_name}" gives {space_text(distinct[0])}'
    return None


def central_problem(config: object, envs: Sequence[TeamEnv]) -> tuple[str, str] | None:
    """("critic", reason) when an algorithm config asking for `critic: "central"` cannot run on an agent's envs
    (each env the agent has bodies in), else None. The lab asks this when it builds the agent's teams; spec
    validation can ask it with its probed block spaces (it knows all of this before running)."""
    if getattr(config, "critic", None) != "central":
        return None
    for env in envs:
        problem = team_problem(env)
        if problem is not None:
            return "critic", problem
    return None


def body_ids(team: Team) -> np.ndarray:
    """The one-hot ids (hi - lo, size) of the group's bodies within their team."""
    return np.eye(team.size, dtype=np.float32)[team.lo:team.hi]


def critic_input(joint: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The critic's input (T * k, n * d + n) for joint observations `joint` (T, n, *obs_shape) of T steps and the
    one-hot ids (k, n) of k bodies: row t * k + j is [joint[t] flattened | ids[j]]."""
    T, n = joint.shape[0], joint.shape[1]
    k = ids.shape[0]
    flat = joint.reshape(T, 1, -1).float().expand(T, k, -1)
    return torch.cat([flat, ids.reshape(1, k, n).expand(T, k, n)], dim=2).reshape(T * k, -1)


class CentralCritic:
    """What an on-policy algorithm keeps for its groups' central critic: each group's Team, the current TeamView
    (`team_now[group]`, set by the lab before act and update), its body ids, and the joint observation of each
    rollout step (one copy of the env's obs per step, not one per body)."""

    def __init__(self, teams: Sequence[Team], n_steps: Sequence[int], normalize: bool,
                 device: torch.device | None = None) -> None:
        self.teams = list(teams)
        self.device = torch.device("cpu") if device is None else device
        self.team_now: list[TeamView | None] = [None] * len(self.teams)
        self.acted: list[np.ndarray | None] = [None] * len(self.teams)  # the joint obs `now` prepared, for update
        self.ids = [torch.as_tensor(body_ids(t), device=device) for t in teams]
        self.joint = [np.zeros((T, t.size) + space_shape(t.observation_space), np.float32)
                      for t, T in zip(teams, n_steps)]
        self.last = [np.zeros((t.size,) + space_shape(t.observation_space), np.float32)
                     for t in teams]
        self.norms = [ObsNormalizer(space_shape(t.observation_space)) if normalize else None
                      for t in teams]

    def prepare(self, group: int, joint: np.ndarray, update: bool = False) -> np.ndarray:
        """A joint observation as the critic takes it: normalised when configured, else float32."""
        norm = self.norms[group]
        if norm is not None:
            return norm(joint, update)
        return joint if joint.dtype == np.float32 else joint.astype(np.float32)

    def whole(self, group: int) -> bool:
        """Whether the group holds every body of its team (its obs are the joint obs: parameter sharing)."""
        team = self.teams[group]
        return team.lo == 0 and team.hi == team.size

    def now(self, group: int, update_norm: bool = False, prepared: np.ndarray | None = None) -> torch.Tensor:
        """The critic input of the group's bodies at the current obs (the env's joint obs of this parity);
        `prepared`: that joint obs already prepared (a group holding the whole team, sharing its normaliser)."""
        view = self.team_now[group]
        assert view is not None, "the lab sets team_now before act"
        joint = prepared if prepared is not None else self.prepare(group, view.obs, update_norm)
        self.acted[group] = joint
        return self.input(group, joint[None])

    def take_acted(self, group: int, view: TeamView) -> np.ndarray:
        """The joint obs of the step as `now` prepared it at act (the buffer at that parity is unchanged until
        the update), else prepared now."""
        joint, self.acted[group] = self.acted[group], None
        return self.prepare(group, view.obs) if joint is None else joint

    def input(self, group: int, joints: np.ndarray) -> torch.Tensor:
        """The critic input (T * k, width) of the group's k bodies over T joint observations (T, n, *shape)."""
        x = torch.from_numpy(np.ascontiguousarray(joints))
        return critic_input(x if self.device.type == "cpu" else x.to(self.device), self.ids[group])

    def state_dict(self) -> list:
        return [n.state_dict() if n is not None else None for n in self.norms]

    def load_state_dict(self, state: list) -> None:
        for n, s in zip(self.norms, state):
            if n is not None and s is not None:
                n.load_state_dict(s)
