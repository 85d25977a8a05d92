"""Resolve the spec's `body` section into the sorted list of (agent, env, body) coordinates."""
from __future__ import annotations

from typing import Sequence

from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.schema import BodySpec
from slm_lab_like.spec.validate import show

Coord = tuple[int, int, int]


def resolve(body: BodySpec, n_agents: int, n_envs: int) -> list[Coord]:
    """Sorted (a, e, b) coordinates; b counts an agent's bodies within one env from 0 without gaps."""
    if body.product != "custom":
        if body.coords is not None:
            raise SpecError("body.coords", f'only used with product "custom", got product "{body.product}"')
        nums = _nums(body.num, n_envs)
        if body.product == "outer":
            pairs = [(a, e) for a in range(n_agents) for e in range(n_envs)]
        else:
            if n_agents != n_envs:
                raise SpecError("body.product", f'"inner" pairs agent i with env i and needs as many agents as envs, got {n_agents} agents and {n_envs} envs')
            pairs = [(i, i) for i in range(n_agents)]
        _check_coverage(pairs, n_agents, n_envs)  # every pair has a body (nums are >= 1)
        return [(a, e, b) for a, e in pairs for b in range(nums[e])]
    coords = _custom(body.coords, n_agents, n_envs)
    _check_coverage(coords, n_agents, n_envs)
    return coords


def _nums(num: int | list[int], n_envs: int) -> list[int]:
    if isinstance(num, int):
        if num < 1:
            raise SpecError("body.num", f"expected an integer >= 1, got {num}")
        return [num] * n_envs
    if len(num) != n_envs:
        raise SpecError("body.num", f"expected one count per env ({n_envs}), got {len(num)}: {show(num)}")
    for e, n in enumerate(num):
        if n < 1:
            raise SpecError(f"body.num[{e}]", f"expected an integer >= 1, got {n}")
    return list(num)


def _custom(raw: list[list[int]] | None, n_agents: int, n_envs: int) -> list[Coord]:
    if not raw:
        raise SpecError("body.coords", 'product "custom" needs a non-empty list of [agent, env, body] triples')
    seen: set[Coord] = set()
    for i, triple in enumerate(raw):
        where = f"body.coords[{i}]"
        if len(triple) != 3:
            raise SpecError(where, f"expected an [agent, env, body] triple, got {show(triple)}")
        a, e, b = triple
        if not 0 <= a < n_agents:
            raise SpecError(where, f"agent index {a} out of range: the spec has {n_agents} agent(s)")
        if not 0 <= e < n_envs:
            raise SpecError(where, f"env index {e} out of range: the spec has {n_envs} env(s)")
        if b < 0:
            raise SpecError(where, f"body index {b} must be >= 0")
        if (a, e, b) in seen:
            raise SpecError(where, f"duplicate coordinate {show(triple)}")
        seen.add((a, e, b))
    coords = sorted(seen)
    counts: dict[tuple[int, int], list[int]] = {}
    for a, e, b in coords:
        counts.setdefault((a, e), []).append(b)
    for (a, e), bs in counts.items():
        if bs != list(range(len(bs))):
            missing = sorted(set(range(max(bs) + 1)) - set(bs))
            raise SpecError("body.coords", f"agent {a} in env {e} has a gap in its body indices: missing {missing}")
    return coords


def _check_coverage(placed: Sequence[tuple[int, ...]], n_agents: int, n_envs: int) -> None:
    """Every agent and every env has a body: `placed` holds (agent, env, ...) tuples (coords or agent-env pairs)."""
    agents = {t[0] for t in placed}
    envs = {t[1] for t in placed}
    for a in range(n_agents):
        if a not in agents:
            raise SpecError(f"agent[{a}]", "this agent has no body: no coordinate in body places it in an env")
    for e in range(n_envs):
        if e not in envs:
            raise SpecError(f"env[{e}]", "this env has no body: no coordinate in body places an agent in it")
