"""The PettingZoo kinds, parallel and turn-based (AEC): each body takes one or more of the env's players.

A body mapping (`plan`) comes from per-body options (player, role, entity, null obs/action, super action)
merged by the spec layer; entities are checked against the env's entity space and handed to its constructor.
An entry with a whole multiple of the game's players as bodies (2k bodies in a two-player game) hosts k copies of the
game (`envs.copies.GameCopies`): bodies [c * n, (c + 1) * n) play copy c, each copy's bodies mapped as one game's.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, ClassVar, Sequence

from slm_lab_like.envs.adapter import EntryError, EnvAdapter, EnvEntry, Hosting, build_error
from slm_lab_like.envs.base import Clock, LabEnv
from slm_lab_like.envs.copies import GameCopies
from slm_lab_like.envs.entities import EntityError
from slm_lab_like.envs.make import creator_metadata, multiagent_api, multiagent_factory
from slm_lab_like.envs.pettingzoo_env import PettingZooEnv, SlotError, SlotPlan, plan_slots


@dataclass
class MultiAgentPlan:
    """How to build one multi-agent env: its factory (kwargs and entities bound) and the slot plans of each copy of
    the game (one list for one game)."""

    make: Callable[[], Any]
    plans: list[list[SlotPlan]]


class PettingZooKind(EnvAdapter):
    """A PettingZoo env of one API; see the module doc."""

    api: ClassVar[str]
    priority = 10

    @classmethod
    def claims(cls, entry: EnvEntry) -> bool:
        return entry.remote is None and multiagent_api(entry.name) == cls.api

    def body_options_problem(self) -> str | None:
        return None

    def factory(self) -> Callable[..., Any]:
        """What builds the env (its kwargs not bound); EntryError at `name` when it cannot be imported."""
        try:
            return multiagent_factory(self.entry.name)
        except (ValueError, ImportError) as err:
            raise EntryError("name", str(err)) from None

    def _plan(self, options: Sequence[dict[str, Any]], wheres: Sequence[str]) -> MultiAgentPlan:
        """Players for each body (options copied, not changed); SlotError / EntryError when the mapping is wrong."""
        options = [dict(o) for o in options]
        factory = self.factory()
        kwargs = dict(self.entry.kwargs)
        with_entity = any(o.get("entity") is not None for o in options)
        if with_entity:
            kwargs["entities"] = _entities(self.entry.name, factory, options, wheres, kwargs)
        make = partial(factory, **kwargs)
        try:
            probe = make()
        except EntityError as err:
            raise EntryError(f"kwargs.{err.path}", err.message) from None
        except Exception as err:  # a user's constructor may fail in any way; report it in one line
            raise build_error(self.entry.name, kwargs, err) from None
        players = list(probe.possible_agents)
        probe.close()
        if with_entity:
            for k, o in enumerate(options):
                o["player"] = players[k]
        n = len(players)
        several = any(isinstance(o.get("player"), (list, tuple)) for o in options)
        copies = len(options) // n if len(options) > n and len(options) % n == 0 and not several else 1
        size = len(options) // copies
        return MultiAgentPlan(make, [plan_slots(players, options[c * size:(c + 1) * size],
                                                wheres[c * size:(c + 1) * size], self.entry.name)
                                     for c in range(copies)])

    def build(self, n_slots: int, clock: Clock, plan: Any = None) -> LabEnv:
        if plan is None:
            plan = self.plan([{} for _ in range(n_slots)], [f"slot {i}" for i in range(n_slots)])
        name, api, max_t = self.entry.name, self.api, self.entry.max_t
        if len(plan.plans) == 1:
            return PettingZooEnv(name, plan.make, api, plan.plans[0], clock, max_t)
        return GameCopies(name, [partial(PettingZooEnv, name, plan.make, api, slots, max_t=max_t)
                                 for slots in plan.plans], clock)

    def host(self) -> Hosting:
        return Hosting(partial(self.factory(), **self.entry.kwargs), self.api)

    def metadata(self) -> dict[str, Any]:
        return creator_metadata(self.factory(), self.entry.kwargs)


class PettingZooParallel(PettingZooKind):
    """A PettingZoo ParallelEnv: every live player acts every step."""

    kind = "PettingZoo parallel"
    api = "parallel"


class PettingZooAEC(PettingZooKind):
    """A PettingZoo AECEnv: players take turns."""

    kind = "PettingZoo turn-based (AEC)"
    api = "aec"


def _entities(name: str, factory: Any, options: list[dict[str, Any]], wheres: Sequence[str],
              kwargs: dict[str, Any]) -> list[Any]:
    """Each body's entity, checked against the env's entity space (SlotError at the body's path otherwise)."""
    space = getattr(factory, "entity_space", None)
    first = next(k for k, o in enumerate(options) if o.get("entity") is not None)
    if space is None:
        raise SlotError(f"{wheres[first]}.entity", f'env "{name}" declares no entity space; remove "entity"')
    if "entities" in kwargs:
        raise EntryError("kwargs.entities", "entities are given per body in this spec; remove kwargs.entities")
    for k, o in enumerate(options):
        where = f"{wheres[k]}.entity"
        entity = o.get("entity")
        if entity is None:
            raise SlotError(where, f'missing: env "{name}" makes one player per body entity, so every body in it '
                                   f"needs one; allowed: {', '.join(space.allowed_names())}")
        if o.get("player") is not None or o.get("role") is not None:
            raise SlotError(wheres[k], "a body with an entity is that entity's player; remove player / role")
        bare = {key: v for key, v in entity.items() if key != "start"} if isinstance(entity, dict) else entity
        try:
            space.make(bare, where)
        except EntityError as err:
            raise SlotError(err.path, err.message) from None
    return [o["entity"] for o in options]
