"""Search variables: `key__grid_search`, `key__choice`, `key__uniform`, `key__loguniform`,
`key__randint`, `key__normal` in a block that mirrors the spec; parsed, checked and applied."""
from __future__ import annotations

import difflib
import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pydash

from slm_lab_like.spec.errors import SpecError, join
from slm_lab_like.spec.validate import show

KINDS = ("grid_search", "choice", "uniform", "loguniform", "randint", "normal")


@dataclass(frozen=True)
class SearchVar:
    """One searched key: its dotted spec path (pydash syntax), the kind of search and its arguments."""

    path: str
    kind: str
    args: list
    key: str = ""  # where the variable is written in the spec's search block, for errors

    def reach(self) -> list[Any]:
        """The values that stand for every value a trial can get, to validate the spec with: each grid or choice
        value, both ends of a range (a randint's high is excluded, as its draws exclude it), a normal's mean."""
        if self.kind in ("grid_search", "choice"):
            return list(self.args)
        low, high = self.args
        if self.kind == "normal":
            return [float(low)]
        return [low, high - 1] if self.kind == "randint" else [float(low), float(high)]

    def sample(self, rng: np.random.Generator) -> Any:
        """Draw one value (grid variables are expanded by `grid`, not sampled)."""
        low, high = (self.args + [None, None])[:2]
        if self.kind in ("grid_search", "choice"):
            return self.args[int(rng.integers(len(self.args)))]
        if self.kind == "uniform":
            return float(rng.uniform(low, high))
        if self.kind == "loguniform":
            return float(math.exp(rng.uniform(math.log(low), math.log(high))))
        if self.kind == "randint":
            return int(rng.integers(low, high))
        return float(rng.normal(low, high))


def parse(block: Any, path: str = "search") -> list[SearchVar]:
    """Every search variable in a search block; SpecError at the offending path otherwise."""
    found: list[SearchVar] = []
    _walk(block, path, "", found)
    return found


def _walk(node: Any, path: str, target: str, found: list[SearchVar]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            base, sep, kind = str(key).rpartition("__")
            if sep and base and kind in KINDS:
                found.append(_var(join(path, key), join(target, base), kind, value))
            elif sep and base:
                close = difflib.get_close_matches(kind, KINDS, n=1)
                hint = f'did you mean "{close[0]}"?' if close else f'expected one of {", ".join(KINDS)}'
                raise SpecError(join(path, key), f'unknown search kind "{kind}"; {hint}')
            elif isinstance(value, (dict, list)):
                _walk(value, join(path, key), join(target, key), found)
            else:
                raise SpecError(join(path, key), f"expected a search variable KEY__KIND or a nested block, got {show(value)}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _walk(value, join(path, i), join(target, i), found)
    else:
        raise SpecError(path, f"expected an object, got {show(node)}")


def _var(path: str, target: str, kind: str, args: Any) -> SearchVar:
    def bad(why: str) -> SpecError:
        return SpecError(path, f"{why}, got {show(args)}")

    if not isinstance(args, list) or not args:
        raise bad("expected a non-empty list")
    if kind in ("grid_search", "choice"):
        return SearchVar(target, kind, args, path)
    if len(args) != 2 or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
        raise bad(f"expected [{'mean, std' if kind == 'normal' else 'low, high'}] numbers")
    low, high = args
    if kind == "randint" and not all(isinstance(a, int) for a in args):
        raise bad("expected [low, high] integers")
    if kind == "normal":
        if high <= 0:
            raise bad("expected a positive standard deviation")
    elif low >= high:
        raise bad("expected low < high")
    if kind == "loguniform" and low <= 0:
        raise bad("expected positive bounds")
    return SearchVar(target, kind, list(args), path)


def apply(raw: dict, values: dict[str, Any]) -> dict:
    """A copy of a raw spec with each dotted path set to its value (pydash handles `a[0].b`)."""
    out = pydash.clone_deep(raw)
    for path, value in values.items():
        pydash.set_(out, path, value)
    return out


def grid(variables: list[SearchVar]) -> list[dict[str, Any]]:
    """Every combination of the grid-search variables (one empty combination when there are none)."""
    grids = [v for v in variables if v.kind == "grid_search"]
    return [dict(zip((v.path for v in grids), combo)) for combo in itertools.product(*(v.args for v in grids))]


def check_targets(raw: dict, variables: list[SearchVar], validate: Callable[[dict], Any]) -> None:
    """Validate the spec with each variable set to each of its `reach` values, so a bad target path or a value
    some trial would get and the spec refuses (a choice of the wrong type, a range beyond a key's bounds) is an
    error at the search key before any trial runs."""
    for var in variables:
        where = var.key or f"search.{var.path}"
        if not pydash.has(raw, var.path):
            parent, _, _ = var.path.rpartition(".")
            if parent and not pydash.has(raw, parent):
                raise SpecError(where, "searched key has no place in the spec (its parent is missing)")
        for value in var.reach():
            try:
                validate(apply(raw, {var.path: value}))
            except SpecError as err:
                if err.path in ("", var.path):
                    raise SpecError(where, f"a trial would set {var.path} to {show(value)}: {err.message}") from None
                raise SpecError(where, f"a trial would set {var.path} to {show(value)}; then {err.path}: "
                                       f"{err.message}") from None
