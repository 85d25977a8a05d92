"""The AEB space: bodies at (agent, env, body) coordinates, the envs that host them, the agents that
act for them, and the views that connect the two without copies or per-body Python loops."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Sequence

import numpy as np
from numpy import count_nonzero

from agents.base import AgentContext, Algorithm, BodyGroup, Transition
from agents.registry import ALGORITHMS
from envs.base import Clock, LabEnv, SlotBlock
from slm_lab_like.spec.coords import Coord, resolve
from slm_lab_like.spec.envs import plan_envs
from slm_lab_like.spec.schema import Spec


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
            for env_spec, p in zip(spec.env, self.plans):
                clock = Clock(max_frame=env_spec.max_frame, max_episode=env_spec.max_episode)
                self.envs.append(p.adapter.build(len(p.slots), clock, p.plan))
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
        """Write the agent's actions for the group at obs `parity`; in a gated env only the bodies whose turn it
        is are asked (the agent reads them from act_rows, with the legal-action mask from act_masks)."""
        if self.acting is not None:
            rows = self.acting[parity]
            if not count_nonzero(rows):
                return
            self.agent.act_rows[self.gid] = rows
            self.agent.act_masks[self.gid] = None if self.mask is None else self.mask[parity]
        self.action[...] = self.agent.act(self.gid, self.obs[parity])

    def update(self, parity: int) -> None:
        """Hand the agent the step's transition (in a gated env, only when some body's transition completed)."""
        trans = self.transitions[parity]
        if trans.acting is None or count_nonzero(trans.acting):
            self.agent.update(self.gid, trans)


def _views(block: SlotBlock, lo: int, hi: int) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray, tuple[Transition, Transition]]:
    s = slice(lo - block.start, hi - block.start)
    obs = (block.obs[0][s], block.obs[1][s])
    mask = block.action_mask
    final_mask = block.final_action_mask
    trans = tuple(
        Transition(obs=obs[p], action=block.action[s], reward=block.reward[s], next_obs=obs[1 - p],
                   terminated=block.terminated[s], truncated=block.truncated[s], final_obs=block.final_obs[s],
                   action_mask=None if mask is None else mask[p][s],
                   next_action_mask=None if mask is None else mask[1 - p][s],
                   final_action_mask=None if final_mask is None else final_mask[s],
                   acting=None if block.completed is None else block.completed[s])
        for p in (0, 1))
    return obs, block.action[s], trans  # type: ignore[return-value]


class AgentSpace:
    """The session's agents; each agent's bodies are split into groups (one env, one signature)."""

    def __init__(self, spec: Spec, coords: Sequence[Coord], env_space: EnvSpace, seed: int) -> None:
        self.specs = spec.agent
        self.bodies: dict[Coord, Body] = {}
        self.agents: list[Algorithm] = []
        self.links: list[GroupLink] = []
        for a, agent_spec in enumerate(spec.agent):
            groups: list[BodyGroup] = []
            pending: list[tuple[int, SlotBlock, int, int]] = []
            for e, env in enumerate(env_space.envs):
                slots = [i for i, c in enumerate(env_space.slots[e]) if c[0] == a]
                if not slots:
                    continue
                lo, hi = slots[0], slots[-1] + 1
                for block in env.blocks:
                    blo, bhi = max(lo, block.start), min(hi, block.stop)
                    if blo >= bhi:
                        continue
                    gid = len(groups)
                    members = tuple(env_space.slots[e][blo:bhi])
                    groups.append(BodyGroup(gid, e, env.name, block.observation_space, block.action_space,
                                            bhi - blo, members, block.action_mask is not None, block.acting is not None))
                    pending.append((e, block, blo, bhi))
                    for row, coord in enumerate(members):
                        self.bodies[coord] = Body(coord, blo + row, gid, row)
            cls = ALGORITHMS.get(agent_spec.algorithm.name)
            ctx = AgentContext(groups=groups, seed=seed + 100 * a, memory=agent_spec.memory, net=agent_spec.net,
                               name=agent_spec.name)
            agent = cls(agent_spec.algorithm.config, ctx)
            if agent_spec.opponent_pool is not None:
                from agents.selfplay import OpponentPool

                agent = OpponentPool(agent, partial(cls, agent_spec.algorithm.config, ctx), agent_spec.opponent_pool,
                                     seed + 100 * a + 1)
            self.agents.append(agent)
            for gid, (e, block, blo, bhi) in enumerate(pending):
                obs, action, trans = _views(block, blo, bhi)
                s = slice(blo - block.start, bhi - block.start)
                mask = None if block.action_mask is None else (block.action_mask[0][s], block.action_mask[1][s])
                acting = None if block.acting is None else (block.acting[0][s], block.acting[1][s])
                self.links.append(GroupLink(agent, gid, env_space.envs[e], e, obs, action, trans, range(blo, bhi),
                                            mask, acting))


class DataSpace:
    """Per-body step data viewed by agent or by env: {coord: array row} maps built from the buffers."""

    def __init__(self, env_space: EnvSpace, agent_space: AgentSpace) -> None:
        self.env_space = env_space
        self.agent_space = agent_space

    def _row(self, coord: Coord, key: str) -> np.ndarray:
        body = self.agent_space.bodies[coord]
        env = self.env_space.envs[coord[1]]
        block = next(b for b in env.blocks if b.start <= body.slot < b.stop)
        data = block.obs[env.parity] if key == "obs" else getattr(block, key)
        return data[body.slot - block.start]

    def by_agent(self, a: int, key: str) -> dict[Coord, np.ndarray]:
        """Agent a's view: each of its bodies' current `key` (obs, action, reward, terminated, truncated)."""
        return {c: self._row(c, key) for c in sorted(self.agent_space.bodies) if c[0] == a}

    def by_env(self, e: int, key: str) -> dict[Coord, np.ndarray]:
        """Env e's view: the same data for every body in env e, in slot order."""
        return {c: self._row(c, key) for c in self.env_space.slots[e]}


@dataclass
class AEBSpace:
    """The whole space of a session: coordinates, envs, agents and the data views over them."""

    coords: list[Coord]
    env_space: EnvSpace
    agent_space: AgentSpace
    data: DataSpace = field(init=False)

    def __post_init__(self) -> None:
        self.data = DataSpace(self.env_space, self.agent_space)

    @classmethod
    def build(cls, spec: Spec, seed: int) -> "AEBSpace":
        """Resolve the spec's coordinates, make the envs, then the agents wired to them."""
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
