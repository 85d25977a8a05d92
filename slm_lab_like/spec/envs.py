"""A spec's envs through the env layer: each entry's adapter, its body mapping and its probed spaces, and the
agents checked against those spaces, with every problem a SpecError at its JSON path.

This is what makes `check` honest: validation and the session ask the same adapters, so what is accepted
here is what the session builds.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any, Iterator, Sequence

import gymnasium as gym

from slm_lab_like.agents.compat import agent_problem
from slm_lab_like.agents.critic import TeamEnv, central_problem
from slm_lab_like.envs.adapter import BlockSig, EntryError, EnvAdapter
from slm_lab_like.envs.pettingzoo_env import SlotError
from slm_lab_like.envs.registry import adapter_for, register_adapter
from slm_lab_like.remote.adapter import RemoteJudge
from slm_lab_like.spec.coords import Coord
from slm_lab_like.spec.errors import SpecError, join
from slm_lab_like.spec.schema import BodyOptions, Spec

# The remote kind lives above the env layer (it needs ZeroMQ and the judges' clients): the spec layer, where every
# entry of a spec is planned, adds it to the env layer's kinds, so importing slm_lab_like.envs loads no ZeroMQ.
register_adapter(RemoteJudge)


@dataclass
class EnvPlan:
    """One env entry ready to build: its adapter, its slots' coordinates, its body mapping and block spaces."""

    adapter: EnvAdapter
    slots: list[Coord]
    plan: Any
    blocks: list[BlockSig]


@contextmanager
def at_entry(path: str) -> Iterator[None]:
    """Re-raise the env layer's one-line errors as SpecErrors under the entry's JSON path."""
    try:
        yield
    except EntryError as err:
        raise SpecError(join(path, err.key) if err.key else path, err.message) from None
    except SlotError as err:
        raise SpecError(err.path or path, err.message) from None


def plan_envs(spec: Spec, coords: Sequence[Coord]) -> list[EnvPlan]:
    """Every env entry's adapter, body mapping and probed spaces (each entry probed once per process)."""
    out = []
    for e, entry in enumerate(spec.env):
        path = join("env", e)
        slots = sorted(c for c in coords if c[1] == e)
        with at_entry(path):
            adapter = adapter_for(entry)
            problem = adapter.body_options_problem()
            plan = None
            if problem is not None:
                if entry.bodies is not None or entry.by_agent:
                    raise SpecError(join(path, "bodies" if entry.bodies is not None else "by_agent"), problem)
            else:
                plan = adapter.plan(*slot_options(spec, e, slots))
            blocks = adapter.probe(len(slots), plan)
        out.append(EnvPlan(adapter, slots, plan, blocks))
    return out


def check_agents(spec: Spec, plans: Sequence[EnvPlan]) -> None:
    """Each agent's algorithm, memory and net against the spaces of the envs its bodies are in."""
    for a, agent in enumerate(spec.agent):
        masked = any(b.masked for _, b in agent_blocks(a, plans))
        problem = (agent_problem(agent.algorithm, agent.memory, agent.net, agent_signatures(a, plans), masked)
                   or _central_problem(spec, a, plans) or _pool_problem(spec, a, plans)
                   or _starts_problem(spec, a, plans))
        if problem is not None:
            raise SpecError(join(join("agent", a), problem[0]), problem[1])


def _central_problem(spec: Spec, a: int, plans: Sequence[EnvPlan]) -> tuple[str, str] | None:
    """Whether agent a's `critic: "central"` (when asked) can see one team in each env its bodies are in."""
    teams = []
    for e in sorted({e for e, _ in agent_blocks(a, plans)}):
        p = plans[e]
        shared = p.adapter.body_options_problem() is None  # the bodies are players of one multi-agent env
        teams.append(TeamEnv(spec.env[e].name, shared, shared and p.adapter.host().api == "aec",
                             [b.observation_space for b in p.blocks]))
    problem = central_problem(spec.agent[a].algorithm.config, teams)
    return None if problem is None else (f"algorithm.{problem[0]}", problem[1])


def _starts_problem(spec: Spec, a: int, plans: Sequence[EnvPlan]) -> tuple[str, str] | None:
    """Whether agent a would never learn: its `learning_starts` (agent frames) at or past every frame its envs'
    budgets allow it (when each of them has a frame budget)."""
    starts = getattr(spec.agent[a].algorithm.config, "learning_starts", None)
    budgets = [spec.env[e].max_frame for e in {e for e, _ in agent_blocks(a, plans)}]
    if not starts or any(b is None for b in budgets) or starts < sum(b or 0 for b in budgets):
        return None
    return "algorithm.learning_starts", (f"{starts} frames before learning, but the budgets of its envs end after "
                                         f"{sum(b or 0 for b in budgets)}: the agent would never learn")


def _pool_problem(spec: Spec, a: int, plans: Sequence[EnvPlan]) -> tuple[str, str] | None:
    """Whether agent a's opponent pool (when it has one) has games to seat its opponents in: every env its bodies
    are in must be a multi-agent env whose players they are, not copies of a single-agent env."""
    if spec.agent[a].opponent_pool is None:
        return None
    for e in sorted({e for e, _ in agent_blocks(a, plans)}):
        if plans[e].adapter.copies:
            return "opponent_pool", (f'needs a multi-agent game, but env[{e}] "{spec.env[e].name}" is a single-agent '
                                     "env whose bodies are separate copies, with no seat for an opponent")
    return None


def agent_blocks(a: int, plans: Sequence[EnvPlan]) -> list[tuple[int, BlockSig]]:
    """(env index, block) of every block holding some of agent a's bodies, in env order."""
    out = []
    for e, p in enumerate(plans):
        rows = [i for i, c in enumerate(p.slots) if c[0] == a]
        if rows:
            out += [(e, b) for b in p.blocks if max(rows[0], b.start) < min(rows[-1] + 1, b.stop)]
    return out


def agent_signatures(a: int, plans: Sequence[EnvPlan]) -> list[tuple[gym.Space, gym.Space]]:
    """The distinct (observation, action) spaces of agent a's body groups, in env order."""
    sigs: list[tuple[gym.Space, gym.Space]] = []
    for _, b in agent_blocks(a, plans):
        sig = (b.observation_space, b.action_space)
        if sig not in sigs:
            sigs.append(sig)
    return sigs


def slot_options(spec: Spec, e: int, slots: Sequence[Coord]) -> tuple[list[dict[str, Any]], list[str]]:
    """Each slot's options (by_agent of its agent, overridden by its `bodies` entry) and the path that set them."""
    env = spec.env[e]
    path = join("env", e)
    names = [a.name for a in spec.agent]
    for key in env.by_agent:
        if key not in names:
            raise SpecError(join(join(path, "by_agent"), key), f'no agent named "{key}"; agents: {", ".join(names)}')
    if env.bodies is not None and len(env.bodies) != len(slots):
        raise SpecError(join(path, "bodies"), f"expected one entry per body placed in this env ({len(slots)}: "
                                              f"{', '.join('a%de%db%d' % c for c in slots)}), got {len(env.bodies)}")
    options, wheres = [], []
    for k, (a, _, _) in enumerate(slots):
        merged: dict[str, Any] = {}
        where = path
        for source, opts in ((join(join(path, "by_agent"), names[a]), env.by_agent.get(names[a])),
                             (join(join(path, "bodies"), k), env.bodies[k] if env.bodies is not None else None)):
            if opts is not None:
                merged.update(_set_fields(opts))
                where = source
        options.append(merged)
        wheres.append(where if where != path else join(join(path, "bodies"), k))
    return options, wheres


def _set_fields(opts: BodyOptions) -> dict[str, Any]:
    return {f.name: getattr(opts, f.name) for f in fields(opts) if getattr(opts, f.name) is not None}


def check_game_seats(spec: Spec, coords: Sequence[Coord]) -> None:
    """An opponent pool with `game_seats` needs whole games: each env's bodies of that agent a multiple of it."""
    for a, agent in enumerate(spec.agent):
        seats = agent.opponent_pool.game_seats if agent.opponent_pool is not None else 0
        for e, env in enumerate(spec.env):
            n = sum(1 for c in coords if c[:2] == (a, e))
            if seats and n % seats:
                raise SpecError(f"agent[{a}].opponent_pool.game_seats", f'{n} bodies in env[{e}] "{env.name}" are '
                                                                        f"not whole games of {seats} seats")
