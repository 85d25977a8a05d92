"""A centralized critic for the policy-gradient family (MAPPO-style): spec `algorithm.critic: "central"`.

Actors see their own body's observation. The critic of a body sees its *team*: every body of the env the body
is in (the env's players, whichever agents own them, whatever each observes), and is trained on the team's return.

The team's joint observation is every body's observation flattened, in the env's slot order: width W, the sum of
the bodies' observation sizes (bodies may see different spaces, as a speaker and a listener do). What the critic
of the body in slot i of an env with n slots takes from it is `algorithm.critic_input`:

    "all"      [joint observation (W) | one-hot(i) (n)]
    "all_own"  [joint observation (W) | the body's own observation | one-hot(i) (n)]   (MAPPO's agent-specific state)
    "pooled"   [the body's own observation | per observation space: mean and max over its bodies]   (order-free:
               its width does not depend on how many bodies the team has, and teammates have no fixed place)

The one-hot body id lets bodies that share one critic (an agent with several bodies in the env: parameter
sharing) get their own values where the input is otherwise the same for every body. Agents of one team that each
own some of the env's bodies each keep their own central critic over the same joint observation.

Team reward: at each step every body of a group learns from the mean reward of its team's bodies that completed
a transition that step, so advantages are the team's (in a shared-reward env, such as `spread`, this is each
body's own reward). `algorithm.critic_team` says who the team is for the reward: "env" (default), every body of
the env, for cooperative games; "agent", the agent's own bodies in the env (over all its slot blocks), for a side of
a mixed or competitive game, whose critic still sees the whole joint observation (centralised training) but
learns its side's return, not the mean over its opponents'. Truncated episodes bootstrap from the joint observation where every ended body's row is its
final observation.

The joint observation is read where the env writes it: `DataSpace.by_env(e, "obs", parity).arrays`, the env's
observation buffers at that parity (one per slot block, first axis its slots), no copy where the env's bodies
share one space. The lab builds agents with a `TeamContext` (a `Team` per group) and, before each act and update
of a group, sets the group's current `TeamView` (the views of that obs parity) in `team_now`; nothing of this
runs for agents without the option.

A central critic needs an env whose bodies share one world (a multi-agent env), move simultaneously (a PettingZoo
parallel env, not a turn-based one, whose transitions span other bodies' moves) and see Box observations;
`team_problem` says why an env is not one.
"""
# No `from __future__ import annotations` here: classes of this module are subclassed or built elsewhere (dataclass
# and NamedTuple __init__ methods), and string annotations would then resolve only in this module's namespace, not
# where the API reference and typing.get_type_hints read them.

from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple, Sequence

import gymnasium as gym
import numpy as np
import torch

from slm_lab_like.agents.base import AgentContext, space_text
from slm_lab_like.agents.normalizer import ObsNormalizer
from slm_lab_like.array_spaces import space_shape

Blocks = tuple[np.ndarray, ...]  # one array per slot block of an env, first axis the block's slots


@dataclass(frozen=True)
class TeamView:
    """One obs parity of an env as a central critic reads it: views of the env's buffers, one per slot block (first
    axis: the block's slots). `obs` is the joint observation the bodies act on; after the step `next_obs`,
    `final_obs` (valid where a body's episode ended), `reward`, `terminated`, `truncated` and `completed` (the rows
    that hold a transition, None when every row does) describe it."""

    obs: Blocks
    next_obs: Blocks
    final_obs: Blocks
    reward: Blocks
    terminated: Blocks
    truncated: Blocks
    completed: Blocks | None = None

    def team_reward(self, rows: tuple[np.ndarray, ...] | None = None) -> float:
        """The mean reward of the bodies that completed a transition this step (all of them without turns); `rows`:
        per slot block, which of its bodies count (Team.reward_rows; None: every body)."""
        if rows is None and self.completed is None:
            return float(sum(r.sum() for r in self.reward) / sum(len(r) for r in self.reward))
        if rows is None:
            masks = self.completed
        elif self.completed is None:
            masks = rows
        else:
            masks = tuple(c & m for c, m in zip(self.completed, rows))
        assert masks is not None
        n = sum(int(np.count_nonzero(c)) for c in masks)
        return float(sum(r[c].sum() for r, c in zip(self.reward, masks)) / n) if n else 0.0

    def bootstrap_obs(self) -> Blocks:
        """The joint observation to bootstrap from after this step: final_obs rows where a body's episode ended,
        next_obs rows elsewhere (a copy only of a block where some episode ended)."""
        out = []
        for nxt, final, term, trunc in zip(self.next_obs, self.final_obs, self.terminated, self.truncated):
            done = term | trunc
            out.append(np.where(done.reshape((-1,) + (1,) * (nxt.ndim - 1)), final, nxt) if done.any() else nxt)
        return tuple(out)


@dataclass(frozen=True)
class Team:
    """The team of one body group: the env's bodies, in slot blocks of `sizes[b]` bodies that each see
    `spaces[b]`; the group holds slots [lo, hi) (within one block); `views[parity]` are the env's buffers at each
    obs parity; `rewarded`: the slot ranges [lo, hi) of the env whose rewards the team learns (None: every slot)."""

    env_name: str
    lo: int
    hi: int
    spaces: tuple[gym.Space, ...]
    sizes: tuple[int, ...]
    views: tuple[TeamView, TeamView]
    rewarded: tuple[tuple[int, int], ...] | None = None

    @cached_property
    def reward_rows(self) -> tuple[np.ndarray, ...] | None:
        """Per slot block, which of its bodies' rewards the team learns (None: all of them)."""
        if self.rewarded is None:
            return None
        mask = np.zeros(self.size, bool)
        for lo, hi in self.rewarded:
            mask[lo:hi] = True
        bounds = np.cumsum([0, *self.sizes])
        return tuple(mask[a:b] for a, b in zip(bounds[:-1], bounds[1:]))

    @property
    def size(self) -> int:
        """The number of bodies in the team."""
        return sum(self.sizes)

    @cached_property
    def widths(self) -> tuple[int, ...]:
        """The flattened observation size of each block's bodies."""
        return tuple(int(np.prod(space_shape(s))) for s in self.spaces)

    @cached_property
    def starts(self) -> tuple[int, ...]:
        """Where each block's observations start in the joint observation, then its width W (the layout is fixed,
        so it is worked out once, not on each step's critic input)."""
        return tuple(np.cumsum([0, *(n * d for n, d in zip(self.sizes, self.widths))]).tolist())

    @cached_property
    def block(self) -> int:
        """The block that holds the group's slots."""
        return int(np.searchsorted(np.cumsum(self.sizes), self.lo, side="right"))

    @property
    def observation_space(self) -> gym.Space:
        """What each body of the group observes."""
        return self.spaces[self.block]

    @cached_property
    def own_columns(self) -> tuple[int, int]:
        """(start, width) of the group's first body's observation in the joint observation."""
        b = self.block
        d = self.widths[b]
        return self.starts[b] + (self.lo - sum(self.sizes[:b])) * d, d

    def input_width(self, mode: str) -> int:
        """The width of the critic's input for `critic_input` mode (see the module doc)."""
        own = self.widths[self.block]
        if mode == "pooled":
            return own + 2 * sum(self.widths)
        return self.starts[-1] + self.size + (own if mode == "all_own" else 0)

    def input_space(self, mode: str = "all") -> gym.spaces.Box:
        """The critic's input space for `critic_input` mode."""
        return gym.spaces.Box(-np.inf, np.inf, (self.input_width(mode),), np.float32)


@dataclass
class TeamContext(AgentContext):
    """An AgentContext with each group's Team (None for groups of agents without a central critic)."""

    teams: Sequence[Team | None] = ()


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
    for space in env.observation_spaces:
        if not isinstance(space, gym.spaces.Box):
            return f'critic "central" needs Box observations; env "{env_name}" gives {space_text(space)}'
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


def critic_input_problem(config: object) -> tuple[str, str] | None:
    """("critic_input" or "critic_team", reason) where a config chooses a central critic's input or team without a
    central critic, else None."""
    central = getattr(config, "critic", "own") == "central"
    mode = getattr(config, "critic_input", "all")
    if mode != "all" and not central:
        return "critic_input", f'"{mode}" is the input of a central critic; set critic "central" or drop it'
    team = getattr(config, "critic_team", "env")
    if team != "env" and not central:
        return "critic_team", f'"{team}" is the team of a central critic; set critic "central" or drop it'
    return None


def body_ids(team: Team) -> np.ndarray:
    """The one-hot ids (hi - lo, size) of the group's bodies within their team."""
    return np.eye(team.size, dtype=np.float32)[team.lo:team.hi]


def critic_input(joint: torch.Tensor, team: Team, mode: str = "all", ids: torch.Tensor | None = None) -> torch.Tensor:
    """The critic's input (T * k, width) for T joint observations `joint` (T, W) of the group's k bodies: row
    t * k + j is body j's input at step t, laid out as `mode` says (module doc); `ids`: body_ids(team), if made."""
    T, k = joint.shape[0], team.hi - team.lo
    joint = joint.float()
    parts = []
    if mode != "pooled":
        parts.append(joint.reshape(T, 1, -1).expand(T, k, -1))
    if mode != "all":
        start, d = team.own_columns
        parts.append(joint[:, start:start + k * d].reshape(T, k, d))
    if mode == "pooled":
        for start, n, d in zip(team.starts, team.sizes, team.widths):
            block = joint[:, start:start + n * d].reshape(T, n, d)
            parts.append(torch.cat([block.mean(1), block.amax(1)], 1).reshape(T, 1, 2 * d).expand(T, k, 2 * d))
    else:
        ids = torch.as_tensor(body_ids(team), device=joint.device) if ids is None else ids
        parts.append(ids.reshape(1, k, team.size).expand(T, k, team.size))
    return torch.cat(parts, 2).reshape(T * k, -1)


class CentralCritic:
    """What an on-policy algorithm keeps for its groups' central critic: each group's Team and input mode, the
    current TeamView (`team_now[group]`, set by the lab before act and update), and the joint observation of each
    rollout step (one flat copy of the env's obs per step, not one per body)."""

    def __init__(self, teams: Sequence[Team], n_steps: Sequence[int], normalize: bool, mode: str = "all",
                 device: torch.device | None = None) -> None:
        self.teams = list(teams)
        self.mode = mode
        self.device = torch.device("cpu") if device is None else device
        self.team_now: list[TeamView | None] = [None] * len(self.teams)
        self.acted: list[np.ndarray | None] = [None] * len(self.teams)  # the joint obs `now` prepared, for update
        self.ids = [torch.as_tensor(body_ids(t), device=self.device) for t in teams]
        width = [t.starts[-1] for t in teams]
        self.joint = [np.zeros((T, w), np.float32) for w, T in zip(width, n_steps)]
        self.last = [np.zeros(w, np.float32) for w in width]
        self.norms: list[list[ObsNormalizer | None]] = [
            [ObsNormalizer(space_shape(s)) if normalize else None for s in t.spaces] for t in teams]

    def prepare(self, group: int, blocks: Blocks, update: bool = False) -> np.ndarray:
        """A joint observation as the critic takes it, flat (W,) float32: each block normalised when configured."""
        parts = [b if norm is None else norm(b, update) for b, norm in zip(blocks, self.norms[group])]
        if len(parts) == 1:
            flat = parts[0].reshape(-1)
            return flat if flat.dtype == np.float32 else flat.astype(np.float32)
        return np.concatenate([p.reshape(-1) for p in parts], dtype=np.float32)

    def whole(self, group: int) -> bool:
        """Whether the group holds every body of its team (its obs are the joint obs: parameter sharing)."""
        team = self.teams[group]
        return team.lo == 0 and team.hi == team.size

    def now(self, group: int, update_norm: bool = False, prepared: np.ndarray | None = None) -> torch.Tensor:
        """The critic input of the group's bodies at the current obs (the env's joint obs of this parity);
        `prepared`: that joint obs already prepared (a group holding the whole team, sharing its normaliser)."""
        view = self.team_now[group]
        assert view is not None, "the lab sets team_now before act"
        joint = prepared.reshape(-1) if prepared is not None else self.prepare(group, view.obs, update_norm)
        self.acted[group] = joint
        return self.input(group, joint[None])

    def take_acted(self, group: int, view: TeamView) -> np.ndarray:
        """The joint obs of the step as `now` prepared it at act (the buffer at that parity is unchanged until
        the update), else prepared now."""
        joint, self.acted[group] = self.acted[group], None
        return self.prepare(group, view.obs) if joint is None else joint

    def input(self, group: int, joints: np.ndarray) -> torch.Tensor:
        """The critic input (T * k, width) of the group's k bodies over T flat joint observations (T, W)."""
        x = torch.from_numpy(np.ascontiguousarray(joints))
        x = x if self.device.type == "cpu" else x.to(self.device)
        return critic_input(x, self.teams[group], self.mode, self.ids[group])

    def state_dict(self) -> list:
        return [[n.state_dict() if n is not None else None for n in norms] for norms in self.norms]

    def load_state_dict(self, state: list) -> None:
        for norms, saved in zip(self.norms, state):
            saved = saved if isinstance(saved, list) else [saved]  # a checkpoint of one block per team
            for n, s in zip(norms, saved):
                if n is not None and s is not None:
                    n.load_state_dict(s)
