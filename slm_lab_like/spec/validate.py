"""Build dataclasses from JSON data by their type hints, with errors that name the JSON path.

Supported annotations: bool, int, float (ints accepted), str, Any, None, Literal[...], list[T],
dict[str, T], unions of these, and nested dataclasses. Field metadata `min` / `max` bound numbers (and a
schedule's `start` and `end`); NaN is refused everywhere.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import math
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from slm_lab_like.agents.schedule import Schedule
from slm_lab_like.spec.errors import SpecError, join

_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def show(value: Any) -> str:
    """A short JSON rendering of a found value for an error message."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def describe(tp: Any) -> str:
    """Plain words for a type hint: list[int] -> 'a list of integers'."""
    origin, args = get_origin(tp), get_args(tp)
    if tp is bool:
        return "a boolean"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    if tp is type(None) or tp is None:
        return "null"
    if tp is Any:
        return "any value"
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(a) for a in args)
    if origin is list:
        inner = describe(args[0]) if args else "values"
        plural = {"an integer": "integers", "a number": "numbers", "a string": "strings", "a boolean": "booleans"}
        return f"a list of {plural.get(inner, inner)}"
    if origin is dict:
        return f"an object of {describe(args[1])}" if args else "an object"
    if origin in (Union, types.UnionType):
        return " or ".join(describe(a) for a in args)
    if dataclasses.is_dataclass(tp):
        return "an object"
    return getattr(tp, "__name__", str(tp))


def unknown_key(path: str, key: str, known: typing.Iterable[str]) -> SpecError:
    """Error for a key the schema does not have, with a did-you-mean hint."""
    known = list(known)
    close = difflib.get_close_matches(key, known, n=1)
    hint = (f'; did you mean "{close[0]}"?' if close else f"; allowed keys: {', '.join(sorted(known))}" if known
            else "; it takes no keys here")
    return SpecError(join(path, key), f"unknown key{hint}")


def build(tp: Any, value: Any, path: str, meta: typing.Mapping[str, Any] | None = None) -> Any:
    """Check `value` against type hint `tp` and return it converted (dataclasses built)."""
    result = _convert(tp, value, path)
    if isinstance(result, float) and math.isnan(result):
        raise SpecError(path, "expected a number, got NaN")
    if meta and ("min" in meta or "max" in meta):
        if isinstance(result, (int, float)) and not isinstance(result, bool):
            _check_bounds(result, meta, path, value)
        elif isinstance(result, Schedule):  # every value a schedule takes lies between its start and end
            _check_bounds(result.start, meta, join(path, "start"), value.get("start", result.start))
            _check_bounds(result.end, meta, join(path, "end"), value.get("end", result.end))
    return result


def _check_bounds(value: float, meta: typing.Mapping[str, Any], path: str, given: Any) -> None:
    """SpecError unless ``value`` (``given`` in the spec) is within the field's ``min`` / ``max``."""
    if "min" in meta and not value >= meta["min"]:
        raise SpecError(path, f"expected a value >= {meta['min']}, got {show(given)}")
    if "max" in meta and not value <= meta["max"]:
        raise SpecError(path, f"expected a value <= {meta['max']}, got {show(given)}")


class _Mismatch(Exception):
    pass


def _convert(tp: Any, value: Any, path: str) -> Any:
    try:
        return _try(tp, value, path)
    except _Mismatch:
        raise SpecError(path, f"expected {describe(tp)}, got {show(value)}") from None


def _try(tp: Any, value: Any, path: str) -> Any:
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return value
    if tp is type(None) or tp is None:
        if value is None:
            return None
        raise _Mismatch
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _Mismatch
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _Mismatch
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _Mismatch
    if tp is str:
        if isinstance(value, str):
            return value
        raise _Mismatch
    if origin is Literal:
        if any(value == a and type(value) is type(a) for a in args):
            return value
        raise _Mismatch
    if origin is list:
        if not isinstance(value, list):
            raise _Mismatch
        item = args[0] if args else Any
        if item in (int, float, str, bool) and not all(_is_scalar(item, v) for v in value):
            raise _Mismatch
        return [_convert(item, v, join(path, i)) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise _Mismatch
        item = args[1] if args else Any
        return {k: _convert(item, v, join(path, k)) for k, v in value.items()}
    if origin in (Union, types.UnionType):
        return _union(args, value, path)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise _Mismatch
        return build_dataclass(tp, value, path)
    raise TypeError(f"unsupported spec type {tp!r} at {path}")


def _is_scalar(tp: type, v: Any) -> bool:
    if tp is float:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if tp is int:
        return isinstance(v, int) and not isinstance(v, bool)
    return isinstance(v, tp)


def _union(args: tuple, value: Any, path: str) -> Any:
    """Try each member; a nested object error wins over a plain mismatch so its path stays precise."""
    deep: SpecError | None = None
    for a in args:
        try:
            return _try(a, value, path)
        except _Mismatch:
            continue
        except SpecError as e:
            if dataclasses.is_dataclass(a) and isinstance(value, dict):
                deep = deep or e
                continue
            raise
    if deep is not None:
        raise deep
    raise _Mismatch


def build_dataclass(cls: type, data: dict, path: str, skip: typing.Collection[str] = ()) -> Any:
    """Instantiate dataclass `cls` from `data`, rejecting unknown keys and filling defaults."""
    if not isinstance(data, dict):
        raise SpecError(path, f"expected an object, got {show(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = _hints(cls)
    for key in data:
        if key not in fields and key not in skip:
            raise unknown_key(path, key, fields)
    kwargs = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = build(hints[name], data[name], join(path, name), f.metadata)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise SpecError(join(path, name), f"missing required key (expected {describe(hints[name])})")
    return cls(**kwargs)


def to_plain(obj: Any) -> Any:
    """A dataclass tree back to JSON-ready data (for the resolved spec written with results)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    return obj
