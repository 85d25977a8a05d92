"""Build config dataclasses from plain dicts, for components built outside the lab's spec loader (tests, bench)."""
from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Union

from slm_lab_like.agents.registry import Registry


def from_dict(cls: type, data: Any) -> Any:
    """An instance of dataclass `cls` from `data` (a dict, an instance already, or None for the defaults)."""
    if data is None:
        return cls()
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        return data
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: expected a dict, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names - {"name"}
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown keys {sorted(unknown)}; known: {sorted(names)}")
    kwargs = {k: _convert(hints[k], v) for k, v in data.items() if k in names}
    return cls(**kwargs)


def _convert(tp: Any, value: Any) -> Any:
    """Turn dicts into the nested dataclass that `tp` names (directly or inside a union)."""
    if isinstance(value, dict):
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return from_dict(tp, value)
        if typing.get_origin(tp) in (Union, types.UnionType):
            for arg in typing.get_args(tp):
                if isinstance(arg, type) and dataclasses.is_dataclass(arg):
                    return from_dict(arg, value)
    return value


def resolve_component(spec: Any, registry: Registry, default_name: str | None) -> tuple[str, type, Any]:
    """(name, class, config instance) for a memory or net ComponentSpec (None means the default component)."""
    name = default_name if spec is None else spec.name
    if name is None:
        raise ValueError("no component given and no default one")
    cls = registry.get(name)
    config = from_dict(cls.Config, None if spec is None else spec.config)
    return name, cls, config
