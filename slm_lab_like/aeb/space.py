"""The AEB space: bodies at (agent, env, body) coordinates, the envs that host them, the agents that
act for them, and the views that connect the two without copies or per-body Python loops."""
from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property, partial
from operator import itemgetter
from typing import Sequence

import numpy as np
import torch
from numpy import count_nonzero

from slm_lab_like.agents.base import AgentContext, Algorithm, BodyGroup, Transition
from slm_lab_like.agents.critic import Team, TeamContext, TeamView
from slm_lab_like.agents.registry import ALGORITHMS
from slm_lab_like.envs.base import Clock, LabEnv, SlotBlock
from slm_lab_like.spec.coords import Coord, resolve
from slm_lab_like.spec.envs import plan_envs
from slm_lab_like.spec.schema import Spec

PART_NOTE = "raised by "  # the note naming the part of a session (`agent[0] "ppo" build`) an exception came from


@dataclass
class Body:
    """One incarnation of an agent in an env: its coordinate, its env slot and its group row."""

    coord: Coord
    slot: int
    group: int = -1
    row: int = -1

    @property
    def agent(self) -> int:
        return self.coord[0]

    @property
    def env(self) -> int:
        return self.coord[1]


class EnvSpace:
    """The session's envs; env e has one slot per body placed in it, ordered by (agent, body)."""

    def __init__(self, spec: Spec, coords: Sequence[Coord]) -> None:
        self.specs = spec.env
        self.plans = plan_envs(spec, coords)
        self.slots: list[list[Coord]] = [p.slots for p in self.plans]
        self.envs: list[LabEnv] = []
        try:
            for e, (env_spec, p) in enumerate(zip(spec.env, self.plans)):
                clock = Clock(max_frame=env_spec.max_frame, max_episode=env_spec.max_episode)
                try:
                    self.envs.append(p.adapter.build(len(p.slots), clock, p.plan))
                except Exception as err:
                    err.add_note(f'{PART_NOTE}env[{e}] "{env_spec.name}" build')
                    raise
        except BaseException:
            self.close()
            raise

    def reset(self, seed: int) -> None:
        """First reset of every env, with distinct, reproducible seeds per env and per slot."""
        for e, env in enumerate(self.envs):
            env.reset(seed=seed + 10_000 * (e + 1))

    def close(self) -> None:
        for env in self.envs:
            env.close()


@dataclass
class GroupLink:
    """The wiring of one agent group to its env block: views for act and update, per obs parity."""

    agent: Algorithm
    gid: int
    env: LabEnv
    env_index: int
    obs: tuple[np.ndarray, np.ndarray]
    action: np.ndarray
    transitions: tuple[Transition, Transition]
    slots: range
    mask: tuple[np.ndarray, np.ndarray] | None = None
    acting: tuple[np.ndarray, np.ndarray] | None = None

    def act(self, parity: int) -> None:
        """Write the agent's actions for the group at obs `parity`, with the legal-action mask of a masked group (every
        step, gated or not: a game's remote seat acts every step); in a gated env only when some body's turn it is,
        with those rows as `acting`."""
        rows = None
        if self.acting is not None:
            rows = self.acting[parity]
            if not count_nonzero(rows):
                return
        mask = None if self.mask is None else self.mask[parity]
        self.action[...] = self.agent.act(self.gid, self.obs[parity], mask=mask, acting=rows)

    def update(self, parity: int) -> None:
        """Hand the agent the step's transition (in a gated env, only when some body's transition completed)."""
        trans = self.transitions[parity]
        if trans.completed is None or count_nonzero(trans.completed):
            self.agent.update(self.gid, trans)

    def ended(self, parity: int) -> None:
        """Tell the agent which bodies ended an episode at the step, where it gets no update (evaluation)."""
        trans = self.transitions[parity]
        done = trans.terminated | trans.truncated
        if trans.completed is not None:
            done &= trans.completed
        if count_nonzero(done):
            self.agent.episodes_ended(self.gid, done)


@dataclass
class TeamGroupLink(GroupLink):
    """A GroupLink whose agent has a central critic (agents.critic): before act and update it hands the agent the
    env's joint views of the obs parity at hand (`team_now[gid]`), read from DataSpace.by_env."""

    team_now: list[TeamView | None] = field(default_factory=list)
    team_views: tuple[TeamView, ...] = ()

    def act(self, parity: int) -> None:
        self.team_now[self.gid] = self.team_views[parity]
        super().act(parity)

    def update(self, parity: int) -> None:
        self.team_now[self.gid] = self.team_views[parity]
        super().update(parity)


def _views(block: SlotBlock, lo: int, hi: int) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray, tuple[Transition, Transition]]:
    s = slice(lo - block.start, hi - block.start)
    obs = (block.obs[0][s], block.obs[1][s])
    mask = block.action_mask
    final_mask = block.final_action_mask

    def transition(p: int) -> Transition:
        completed = block.completed_of(p)
        return Transition(obs=obs[p], action=block.action[s], reward=block.reward[s], next_obs=obs[1 - p],
                          terminated=block.terminated[s], truncated=block.truncated[s], final_obs=block.final_of(p)[s],
                          action_mask=None if mask is None else mask[p][s],
                          next_action_mask=None if mask is None else mask[1 - p][s],
                          final_action_mask=None if final_mask is None else final_mask[s],
                          completed=None if completed is None else completed[s])

    return obs, block.action[s], (transition(0), transition(1))


class AgentSpace:
    """The session's agents; each agent's bodies are split into groups (one env, one signature).

    An agent with a central critic (`algorithm.critic: "central"`) is built with a TeamContext: each group's
    Team, whose views are the env's arrays from `data.by_env`, and its groups are wired by TeamGroupLinks."""

    def __init__(self, spec: Spec, coords: Sequence[Coord], env_space: EnvSpace, seed: int) -> None:
        self.specs = spec.agent
        self.data = DataSpace(env_space, self)
        self._placed: list[tuple[int, int, tuple[Coord, ...]]] = []  # each group's (gid, first slot, coords)
        self.agents: list[Algorithm] = []
        self.links: list[GroupLink] = []
        for a, agent_spec in enumerate(spec.agent):
            groups: list[BodyGroup] = []
            pending: list[tuple[int, SlotBlock, int, int]] = []
            for e, env in enumerate(env_space.envs):
                lo, hi = (bisect_left(env_space.slots[e], x, key=itemgetter(0)) for x in (a, a + 1))  # sorted by agent
                if lo == hi:
                    continue
                for block in env.blocks:
                    blo, bhi = max(lo, block.start), min(hi, block.stop)
                    if blo >= bhi:
                        continue
                    gid = len(groups)
                    members = tuple(env_space.slots[e][blo:bhi])
                    groups.append(BodyGroup(gid, e, env.name, block.observation_space, block.action_space,
                                            bhi - blo, members, block.action_mask is not None, block.acting is not None))
                    pending.append((e, block, blo, bhi))
                    self._placed.append((gid, blo, members))
            cls = ALGORITHMS.get(agent_spec.algorithm.name)
            central = getattr(agent_spec.algorithm.config, "critic", None) == "central"  # validated by the spec
            by_agent = getattr(agent_spec.algorithm.config, "critic_team", "env") == "agent"
            teams = [self._team(e, blo, bhi, tuple((lo, hi) for e2, _, lo, hi in pending if e2 == e) if by_agent
                                else None) for e, _, blo, bhi in pending] if central else []
            ctx = AgentContext(groups=groups, seed=seed + 100 * a, memory=agent_spec.memory, net=agent_spec.net,
                               name=agent_spec.name)
            if central:
                ctx = TeamContext(groups=groups, seed=seed + 100 * a, memory=agent_spec.memory, net=agent_spec.net,
                                  name=agent_spec.name, teams=teams)
            try:
                agent = learner = cls(agent_spec.algorithm.config, ctx)
                if agent_spec.opponent_pool is not None:
                    from slm_lab_like.agents.selfplay import OpponentPool

                    agent = OpponentPool(agent, partial(cls, agent_spec.algorithm.config, ctx),
                                         agent_spec.opponent_pool, seed + 100 * a + 1)
            except Exception as err:  # a user's algorithm may fail in any way: the session names it in one line
                err.add_note(f'{PART_NOTE}agent[{a}] "{agent_spec.name}" build')
                raise
            self.agents.append(agent)
            for gid, (e, block, blo, bhi) in enumerate(pending):
                obs, action, trans = _views(block, blo, bhi)
                s = slice(blo - block.start, bhi - block.start)
                mask = None if block.action_mask is None else (block.action_mask[0][s], block.action_mask[1][s])
                acting = None if block.acting is None else (block.acting[0][s], block.acting[1][s])
                args = (agent, gid, env_space.envs[e], e, obs, action, trans, range(blo, bhi), mask, acting)
                if central:
                    self.links.append(TeamGroupLink(*args, team_now=learner.team_now,
                                                    team_views=teams[gid].views))
                else:
                    self.links.append(GroupLink(*args))

    @cached_property
    def bodies(self) -> dict[Coord, Body]:
        """Every body by its coordinate, made when first read (a session of thousands of bodies that never asks makes
        none of them)."""
        return {coord: Body(coord, blo + row, gid, row)
                for gid, blo, members in self._placed for row, coord in enumerate(members)}

    def _team(self, e: int, lo: int, hi: int, rewarded: tuple[tuple[int, int], ...] | None = None) -> Team:
        """The team of the bodies in slots [lo, hi) of env e: every body of the env, its arrays read by env (one
        per slot block); `rewarded`: the slot ranges whose rewards it learns (None: all)."""
        env = self.data.env_space.envs[e]
        data = self.data
        turns = env.blocks[0].completed is not None

        def view(p: int) -> TeamView:
            def arrays(key: str, parity: int | None = None) -> tuple[np.ndarray, ...]:
                return data.by_env(e, key, parity).arrays

            return TeamView(obs=arrays("obs", p), next_obs=arrays("obs", 1 - p), final_obs=arrays("final_obs", p),
                            reward=arrays("reward"), terminated=arrays("terminated"), truncated=arrays("truncated"),
                            completed=arrays("completed", p) if turns else None)

        return Team(env.name, lo, hi, tuple(b.observation_space for b in env.blocks),
                    tuple(b.stop - b.start for b in env.blocks), (view(0), view(1)), rewarded)


PARITY_KEYS = ("obs", "action_mask", "acting")
"""Block buffers kept per obs parity: `by_env` reads the one of the parity asked for (the env's current one)."""
STEP_KEYS = ("final_obs", "completed")
"""What a step leaves that a block with `next_step` reads from its parity buffers (SlotBlock.final_of, completed_of)."""
KEYS = ("obs", "final_obs", "action", "reward", "terminated", "truncated", "action_mask", "final_action_mask",
        "acting", "completed")


class EnvData(Mapping[Coord, np.ndarray]):
    """One kind of step data of every body of an env, in slot order, as the env's own buffers (no copies).

    `arrays`: one array per slot block of the env, first axis its slots; `array`: the whole env's (n_slots, ...)
    array, the env's buffer itself, where its bodies share one signature (one block). It also reads as a
    mapping {coord: that body's row} (each row a view of the buffer too)."""

    def __init__(self, coords: Sequence[Coord], arrays: Sequence[np.ndarray], starts: Sequence[int]) -> None:
        self.coords = tuple(coords)
        self.arrays = tuple(arrays)
        self._where = {c: (b, i - starts[b]) for b in range(len(starts)) for i, c in enumerate(self.coords)
                       if starts[b] <= i < starts[b] + len(self.arrays[b])}

    @property
    def array(self) -> np.ndarray:
        """The env's whole array (first axis: its slots); ValueError where its bodies have several signatures."""
        if len(self.arrays) != 1:
            raise ValueError(f"the env's bodies have {len(self.arrays)} observation/action signatures, so their "
                             "data is one array per signature: read `arrays`")
        return self.arrays[0]

    def __getitem__(self, coord: Coord) -> np.ndarray:
        b, row = self._where[coord]
        return self.arrays[b][row]

    def __iter__(self) -> Iterator[Coord]:
        return iter(self.coords)

    def __len__(self) -> int:
        return len(self.coords)


def _block_data(block: SlotBlock, key: str, p: int) -> np.ndarray | None:
    """A block's buffer `key` at parity p (see DataSpace.by_env)."""
    if key == "final_obs":
        return block.final_of(p)
    if key == "completed":
        return block.completed_of(p)
    data = getattr(block, key)
    return data[p] if key in PARITY_KEYS and data is not None else data


class DataSpace:
    """Per-body step data viewed by env (the env's buffers as arrays, zero-copy) or by agent ({coord: row})."""

    def __init__(self, env_space: EnvSpace, agent_space: AgentSpace) -> None:
        self.env_space = env_space
        self.agent_space = agent_space
        self._views: dict[tuple[int, str, int], EnvData] = {}

    def by_env(self, e: int, key: str, parity: int | None = None) -> EnvData:
        """Env e's view of `key` (obs, final_obs, action, reward, terminated, truncated, action_mask,
        final_action_mask, acting, completed): the env's buffers of every body in slot order, no copy (`array`
        for the whole env). Buffers kept per obs parity (obs, action_mask, acting) are read at `parity`, by
        default the env's current one; final_obs and completed of an env whose slots reset a step late are those of
        the step taken from obs[parity], by default the last one. Views are made once and reused, so this is cheap
        on a hot path."""
        env = self.env_space.envs[e]
        if key in PARITY_KEYS:
            p = env.parity if parity is None else parity
        elif key in STEP_KEYS and any(b.next_step for b in env.blocks):  # the step taken from obs[p]: the last one
            p = 1 - env.parity if parity is None else parity
        else:
            p = 0
        cached = self._views.get((e, key, p))
        if cached is not None:
            return cached
        if key not in KEYS:
            raise KeyError(f"unknown step data {key!r}; one of {', '.join(KEYS)}")
        arrays = []
        for block in env.blocks:
            data = _block_data(block, key, p)
            if data is None:
                raise ValueError(f'env "{env.name}" keeps no {key} (its bodies have none)')
            arrays.append(data)
        view = EnvData(self.env_space.slots[e], arrays, [b.start for b in env.blocks])
        self._views[(e, key, p)] = view
        return view

    def by_agent(self, a: int, key: str) -> dict[Coord, np.ndarray]:
        """Agent a's view: each of its bodies' current `key` (rows of the env buffers, as by_env)."""
        return {c: self.by_env(c[1], key)[c] for c in sorted(self.agent_space.bodies) if c[0] == a}


@dataclass
class AEBSpace:
    """The whole space of a session: coordinates, envs, agents and the data views over them."""

    coords: list[Coord]
    env_space: EnvSpace
    agent_space: AgentSpace
    data: DataSpace = field(init=False)

    def __post_init__(self) -> None:
        self.data = self.agent_space.data

    @classmethod
    def build(cls, spec: Spec, seed: int) -> "AEBSpace":
        """Resolve the spec's coordinates, make the envs, then the agents wired to them; `seed` seeds torch first, so
        the same seed gives the same nets wherever a space is built (a session, a test, a tournament player)."""
        torch.manual_seed(seed)
        coords = resolve(spec.body, len(spec.agent), len(spec.env))
        env_space = EnvSpace(spec, coords)
        try:
            agent_space = AgentSpace(spec, coords, env_space, seed)
        except BaseException:
            env_space.close()
            raise
        return cls(coords, env_space, agent_space)

    def close(self) -> None:
        self.env_space.close()
