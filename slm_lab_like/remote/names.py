"""Env names as the whole lab knows them: a judge hosts whatever a spec env entry of that name would run.

The env layer's registry decides what a name is (a gymnasium id, a built-in game such as ``connect_four`` or
``tag_arena``, ``module:Class``, a PettingZoo ``module:env`` / ``module:parallel_env``) and how a judge hosts it
(single-agent, parallel or turn-based), so the judge module, ``spawn_judge``, ``serve`` and ``run_lab.py serve``
accept the same names.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slm_lab_like.envs.adapter import Hosting


@dataclass(frozen=True)
class NamedEnv:
    """An env entry made from a name alone (the fields an env adapter reads)."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_t: int | None = None
    vector: str = "auto"
    remote: str | None = None


def hosting_for(name: str, kwargs: dict[str, Any] | None = None, max_t: int | None = None) -> Hosting:
    """How a judge hosts the env ``name`` (a factory and "single", "parallel" or "aec"); EntryError in one line
    (unknown name with a did-you-mean hint, an env no judge can host, or an env whose first reset or step breaks
    its API or its spaces, found by the adapter's probe with a body in every seat, as `check` finds it)."""
    from slm_lab_like.envs.registry import adapter_for

    adapter = adapter_for(NamedEnv(name, dict(kwargs or {}), max_t))
    hosting = adapter.host()
    if hosting.api == "single":
        adapter.probe(1)
    else:
        env = hosting.make()
        seats = len(env.possible_agents)
        env.close()
        adapter.probe(seats, adapter.plan([{} for _ in range(seats)], [f"seat {i}" for i in range(seats)]))
    return hosting
