"""Bodies in multi-agent envs: merge each body's options, map entities and players, check them as a spec.

Used both when a spec is validated (so `run_lab.py check` reports a bad player, entity or null action at
its JSON path) and when the session builds its envs.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from functools import partial
from typing import Any, Callable, Sequence

from envs.entities import EntityError
from envs.make import lab_env_factory, multiagent_api, multiagent_factory
from envs.pettingzoo_env import SlotError, SlotPlan, plan_slots
from slm_lab_like.aeb.coords import Coord
from slm_lab_like.spec.errors import SpecError, join
from slm_lab_like.spec.schema import BodyOptions, Spec


@dataclass
class MultiAgentPlan:
    """How to build one multi-agent env: its factory (kwargs and entities bound), its API, its slot plans."""

    make: Callable[[], Any]
    api: str
    plans: list[SlotPlan]


def slot_options(spec: Spec, e: int, slots: Sequence[Coord]) -> tuple[list[dict[str, Any]], list[str]]:
    """Each slot's options (by_agent of its agent, overridden by its `bodies` entry) and the path that set them."""
    env = spec.env[e]
    path = f"env[{e}]"
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


def multiagent_plan(spec: Spec, e: int, slots: Sequence[Coord]) -> MultiAgentPlan | None:
    """The plan of env `e` when it is a multi-agent env (None for a gymnasium env); SpecError when invalid."""
    env = spec.env[e]
    path = f"env[{e}]"
    api = multiagent_api(env.name)
    if api is None:
        if env.bodies is not None or env.by_agent:
            key = "bodies" if env.bodies is not None else "by_agent"
            raise SpecError(join(path, key), f'per-body options are for multi-agent envs; "{env.name}" is a '
                                             "single-agent gymnasium env whose bodies are copies of it")
        return None
    options, wheres = slot_options(spec, e, slots)
    try:
        factory = multiagent_factory(env.name)
    except (ValueError, ImportError) as err:
        raise SpecError(join(path, "name"), str(err)) from None
    kwargs = dict(env.kwargs)
    with_entity = [k for k, o in enumerate(options) if o.get("entity") is not None]
    if with_entity:
        _map_entities(env.name, factory, options, wheres, kwargs, path)
    make = partial(factory, **kwargs)
    try:
        probe = make()
    except EntityError as err:
        raise SpecError(join(join(path, "kwargs"), err.path), err.message) from None
    except (TypeError, ValueError, ImportError) as err:
        raise SpecError(join(path, "kwargs"), f'cannot build env "{env.name}": {err}') from None
    players = list(probe.possible_agents)
    probe.close()
    if with_entity:
        for k, o in enumerate(options):
            o["player"] = players[k]
    try:
        plans = plan_slots(players, options, wheres, env.name)
    except SlotError as err:
        raise SpecError(err.path or path, err.message) from None
    return MultiAgentPlan(make, api, plans)


def _map_entities(name: str, factory: Any, options: list[dict[str, Any]], wheres: list[str], kwargs: dict[str, Any],
                  path: str) -> None:
    """Check each body's entity against the env's entity space and hand the list to the env as `entities`."""
    space = getattr(factory, "entity_space", None)
    first = next(k for k, o in enumerate(options) if o.get("entity") is not None)
    if space is None:
        raise SpecError(join(wheres[first], "entity"), f'env "{name}" declares no entity space; remove "entity"')
    if "entities" in kwargs:
        raise SpecError(join(join(path, "kwargs"), "entities"), "entities are given per body in this spec; "
                                                               "remove kwargs.entities")
    for k, o in enumerate(options):
        where = join(wheres[k], "entity")
        entity = o.get("entity")
        if entity is None:
            raise SpecError(where, f'missing: env "{name}" makes one player per body entity, so every body in it '
                                   f"needs one; allowed: {', '.join(space.allowed_names())}")
        if o.get("player") is not None or o.get("role") is not None:
            raise SpecError(wheres[k], "a body with an entity is that entity's player; remove player / role")
        bare = {key: v for key, v in entity.items() if key != "start"} if isinstance(entity, dict) else entity
        try:
            space.make(bare, where)
        except EntityError as err:
            raise SpecError(err.path, err.message) from None
    kwargs["entities"] = [o["entity"] for o in options]


def check_multiagent(spec: Spec, coords: Sequence[Coord]) -> None:
    """Validate every multi-agent (or lab-native) env's bodies by building its plan and its LabEnv once (cheap
    for games)."""
    from envs.base import Clock
    from envs.pettingzoo_env import PettingZooEnv

    _check_game_seats(spec, coords)
    for e, env in enumerate(spec.env):
        slots = sorted(c for c in coords if c[1] == e)
        lab_env = lab_env_factory(env.name)
        if lab_env is not None and env.remote is None:
            if env.bodies is not None or env.by_agent:
                key = "bodies" if env.bodies is not None else "by_agent"
                raise SpecError(join(f"env[{e}]", key), f'"{env.name}" takes no per-body options: it places its '
                                                        "bodies itself, in slot order")
            try:
                lab_env(env.name, len(slots), Clock(max_frame=1), env.max_t, **env.kwargs).close()
            except (TypeError, ValueError) as err:
                raise SpecError(f"env[{e}]", str(err)) from None
            continue
        plan = multiagent_plan(spec, e, slots)
        if plan is None:
            continue
        try:
            lab_env = PettingZooEnv(env.name, plan.make, plan.api, plan.plans, Clock(max_frame=1))
        except SlotError as err:
            raise SpecError(err.path or f"env[{e}]", err.message) from None
        lab_env.close()


def _check_game_seats(spec: Spec, coords: Sequence[Coord]) -> None:
    """An opponent pool with `game_seats` needs whole games: each env's bodies of that agent a multiple of it."""
    for a, agent in enumerate(spec.agent):
        seats = agent.opponent_pool.game_seats if agent.opponent_pool is not None else 0
        for e, env in enumerate(spec.env):
            n = sum(1 for c in coords if c[:2] == (a, e))
            if seats and n % seats:
                raise SpecError(f"agent[{a}].opponent_pool.game_seats", f'{n} bodies in env[{e}] "{env.name}" are '
                                                                        f"not whole games of {seats} seats")
