"""Entity registry: what a body *is* inside an env (a runner, a chaser, ...), by name, with checked parameters.

An entity is a small object with a type name, declared parameters (defaults plus validation), per-instance
state (position, alive) and an ``update(action, world)`` rule that applies its dynamics. Envs declare an
:class:`EntitySpace` (the entity types they allow); users register their own subclasses by name with
:func:`register_entity` or name them as ``module:Class``. Every problem is one :class:`EntityError` line
that names where it is, e.g. ``body[2].entity: type "tank" is not allowed by env "tag_arena"; allowed: chaser, runner``.

This module depends on numpy only, so specs can be checked without any game library installed.
"""
from __future__ import annotations

import difflib
import importlib
import math
import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Generic, Mapping, Protocol, Sequence, TypeVar, overload

import numpy as np

__all__ = [
    "ACTION_DELTAS",
    "ENTITY_REGISTRY",
    "Chaser",
    "Entity",
    "EntityError",
    "EntitySpace",
    "GridEntity",
    "GridWorld",
    "Param",
    "Runner",
    "entity_from_spec",
    "make_entity",
    "register_entity",
    "resolve_entity_class",
]


class EntityError(ValueError):
    """A one-line entity problem naming where it is; ``path`` and ``message`` let a spec layer re-wrap it."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


_KINDS: dict[type, str] = {int: "int", float: "float", bool: "bool", str: "str"}


def _describe(value: Any) -> str:
    """Short 'value (type)' text for error messages."""
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return f"{shown} ({type(value).__name__})"


T = TypeVar("T")


@dataclass(frozen=True)
class Param(Generic[T]):
    """A declared entity parameter: default, type (int, float, bool or str), optional bounds or choices."""

    default: T
    kind: type = int
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | None = None
    doc: str = ""

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise TypeError(f"Param kind must be one of int, float, bool, str; got {self.kind!r}")
        self.check(self.default, "default")

    def expected(self) -> str:
        """Human text of what this parameter accepts, e.g. 'int >= 0' or 'float in [0, 1]'."""
        text = _KINDS[self.kind]
        if self.choices is not None:
            return f"{text}, one of {', '.join(repr(c) for c in self.choices)}"
        if self.low is not None and self.high is not None:
            return f"{text} in [{self.low:g}, {self.high:g}]"
        if self.low is not None:
            return f"{text} >= {self.low:g}"
        if self.high is not None:
            return f"{text} <= {self.high:g}"
        return text

    def check(self, value: Any, where: str) -> Any:
        """The value converted to this parameter's type, or EntityError naming ``where``."""
        if self.kind is bool:
            ok = isinstance(value, (bool, np.bool_))
            converted: Any = bool(value) if ok else None
        elif self.kind is int:
            ok = isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
            converted = int(value) if ok else None
        elif self.kind is float:
            ok = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
            converted = float(value) if ok else None
            ok = ok and math.isfinite(converted)
        else:
            ok = isinstance(value, str)
            converted = value if ok else None
        if ok and self.choices is not None:
            ok = converted in self.choices
        if ok and self.low is not None:
            ok = converted >= self.low
        if ok and self.high is not None:
            ok = converted <= self.high
        if not ok:
            raise EntityError(where, f"expected {self.expected()}, got {_describe(value)}")
        return converted

    if TYPE_CHECKING:  # Entity.__init_subclass__ replaces each declaration by its value: an entity reads a T
        @overload
        def __get__(self, obj: None, owner: type) -> Param[T]: ...
        @overload
        def __get__(self, obj: object, owner: type) -> T: ...
        def __get__(self, obj: object, owner: type) -> Param[T] | T: ...


class GridWorld(Protocol):
    """What a grid entity needs from its world to move."""

    def move(self, position: np.ndarray, delta: np.ndarray, steps: int) -> np.ndarray:
        """The cell reached from ``position`` after up to ``steps`` moves of ``delta``."""
        ...


class Entity:
    """Base of all entity types: declared ``Param`` class attributes, per-instance state, and ``update``.

    Subclasses declare parameters as class attributes, ``speed = Param(1, int, low=0)``, and may change an
    inherited parameter's default by assigning a plain value, ``speed = 2``; the value is checked against
    the inherited declaration. ``role`` says what the entity is to an env (e.g. "runner"), whatever its name.
    """

    type_name: ClassVar[str] = "entity"
    role: ClassVar[str] = ""
    param_specs: ClassVar[dict[str, Param]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Collect declared parameters (own and inherited) into ``param_specs``, applying new defaults."""
        super().__init_subclass__(**kwargs)
        specs = dict(cls.param_specs)
        for name, value in list(vars(cls).items()):
            if isinstance(value, Param):
                specs[name] = value
            elif name in specs and not name.startswith("_") and not callable(value):
                old = specs[name]
                where = f"{cls.__name__}.{name}"
                specs[name] = Param(old.check(value, where), old.kind, old.low, old.high, old.choices, old.doc)
        for name, spec in specs.items():
            setattr(cls, name, spec.default)
        cls.param_specs = specs
        if not cls.type_name or "type_name" not in vars(cls):
            cls.type_name = f"{cls.__module__}:{cls.__qualname__}"

    def __init__(self, **params: Any) -> None:
        values = self.check_params(params, where=self.type_name)
        for name, value in values.items():
            setattr(self, name, value)
        self.position = np.zeros(2, dtype=np.int64)
        self.alive = True

    @classmethod
    def check_params(cls, params: Mapping[str, Any], where: str) -> dict[str, Any]:
        """All parameter values (defaults filled in) after checking names and types; EntityError otherwise."""
        unknown = [k for k in params if k not in cls.param_specs]
        if unknown:
            raise EntityError(
                where,
                f'unknown parameter "{unknown[0]}" for entity type "{cls.type_name}"'
                + _hint(str(unknown[0]), cls.param_specs, "parameters"),
            )
        values = {}
        for name, spec in cls.param_specs.items():
            values[name] = spec.check(params[name], f"{where}.{name}") if name in params else spec.default
        return values

    @classmethod
    def describe(cls) -> dict[str, str]:
        """Parameter name -> 'expected (default ...): doc', for help text and spec documentation."""
        return {
            name: f"{spec.expected()} (default {spec.default!r}){': ' + spec.doc if spec.doc else ''}"
            for name, spec in cls.param_specs.items()
        }

    @property
    def params(self) -> dict[str, Any]:
        """This instance's parameter values by name."""
        return {name: getattr(self, name) for name in self.param_specs}

    def update(self, action: Any, world: Any) -> None:
        """Apply this entity's dynamics for one step given its action; subclasses define it."""
        raise NotImplementedError(f"entity type {self.type_name!r} defines no update rule")

    def captures(self, other: "Entity") -> bool:
        """Whether this entity catches ``other`` in the interaction phase after every entity has moved."""
        return False

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}<{self.type_name}>({params}, position={self.position.tolist()}, alive={self.alive})"


def _hint(name: str, known: Mapping[str, Any] | Sequence[str], what: str) -> str:
    """'; did you mean "x"?' when a known name is close, else '; known <what>: a, b' (or '; no <what>')."""
    options = sorted(known)
    close = difflib.get_close_matches(name, options, n=1)
    if close:
        return f'; did you mean "{close[0]}"?'
    return f"; known {what}: {', '.join(options)}" if options else f"; no {what}"


ENTITY_REGISTRY: dict[str, type[Entity]] = {}

E = TypeVar("E", bound=type[Entity])


def register_entity(name: str, *, replace: bool = False) -> Callable[[E], E]:
    """Class decorator filing an Entity subclass under ``name`` so specs and envs can refer to it."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"entity type name must be an identifier, got {name!r}")

    def deco(cls: E) -> E:
        if not (isinstance(cls, type) and issubclass(cls, Entity)):
            raise TypeError(f"register_entity({name!r}) needs an Entity subclass, got {cls!r}")
        old = ENTITY_REGISTRY.get(name)
        same = old is not None and (old.__module__, old.__qualname__) == (cls.__module__, cls.__qualname__)
        if old is not None and old is not cls and not (replace or same):
            raise ValueError(f"entity type {name!r} is already registered to {old.__module__}:{old.__qualname__}")
        cls.type_name = name
        ENTITY_REGISTRY[name] = cls
        return cls

    return deco


def resolve_entity_class(type_name: str, where: str = "entity") -> type[Entity]:
    """The Entity class for a registered name or a ``module:Class`` path; EntityError otherwise."""
    if not isinstance(type_name, str) or not type_name:
        raise EntityError(where, f"expected an entity type name, got {_describe(type_name)}")
    if ":" in type_name:
        module_name, _, attr = type_name.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise EntityError(where, f'cannot import entity type "{type_name}": {exc}') from None
        if not (isinstance(obj, type) and issubclass(obj, Entity)):
            raise EntityError(where, f'"{type_name}" is not an Entity subclass')
        return obj
    try:
        return ENTITY_REGISTRY[type_name]
    except KeyError:
        raise EntityError(
            where, f'unknown entity type "{type_name}"' + _hint(type_name, ENTITY_REGISTRY, "types")
        ) from None


@dataclass(frozen=True)
class EntitySpace:
    """The entity types an env allows: the named base types and any subclass of them (registered or not)."""

    env: str
    allowed: tuple[str, ...]

    def base_classes(self) -> tuple[type[Entity], ...]:
        """The allowed base classes, looked up in the registry."""
        return tuple(resolve_entity_class(name, f"env {self.env}") for name in self.allowed)

    def allows(self, cls: type[Entity]) -> bool:
        """Whether an entity class may be used in this env."""
        return issubclass(cls, self.base_classes())

    def allowed_names(self) -> list[str]:
        """Sorted registered type names this env accepts (its base types and their registered subclasses)."""
        bases = self.base_classes()
        return sorted(name for name, cls in ENTITY_REGISTRY.items() if issubclass(cls, bases))

    def check(self, cls: type[Entity], where: str) -> None:
        """EntityError unless this env allows ``cls``."""
        if not self.allows(cls):
            raise EntityError(
                where,
                f'type "{cls.type_name}" is not allowed by env "{self.env}"; allowed: {", ".join(self.allowed_names())}',
            )

    def make(self, spec: "str | Mapping[str, Any] | Entity", where: str = "entity") -> Entity:
        """An entity from a spec (a type name, a ``{"type": ..., param: value}`` dict or an instance), checked."""
        if isinstance(spec, Entity):
            self.check(type(spec), where)
            return spec
        return entity_from_spec(spec, where, self)


def make_entity(
    type_name: str,
    params: Mapping[str, Any] | None = None,
    where: str = "entity",
    space: EntitySpace | None = None,
) -> Entity:
    """A new entity of ``type_name`` with checked ``params``; with ``space``, the env must allow the type."""
    if space is not None and isinstance(type_name, str) and ":" not in type_name and type_name not in ENTITY_REGISTRY:
        allowed = space.allowed_names()
        close = difflib.get_close_matches(type_name, allowed, n=1)
        hint = f'; did you mean "{close[0]}"?' if close else f"; allowed: {', '.join(allowed)}"
        raise EntityError(where, f'unknown entity type "{type_name}" for env "{space.env}"{hint}')
    cls = resolve_entity_class(type_name, where)
    if space is not None:
        space.check(cls, where)
    if params is not None and not isinstance(params, Mapping):
        raise EntityError(where, f"expected a mapping of parameters, got {_describe(params)}")
    return cls(**cls.check_params(dict(params or {}), where))


def entity_from_spec(
    spec: "str | Mapping[str, Any]", where: str = "entity", space: EntitySpace | None = None
) -> Entity:
    """An entity from ``"runner"`` or ``{"type": "runner", "speed": 2}``; EntityError naming ``where`` otherwise."""
    if isinstance(spec, str):
        return make_entity(spec, None, where, space)
    if not isinstance(spec, Mapping):
        raise EntityError(where, f'expected a type name or an object with "type", got {_describe(spec)}')
    if "type" not in spec:
        allowed = f"; allowed: {', '.join(space.allowed_names())}" if space is not None else ""
        raise EntityError(where, f'missing "type"{allowed}')
    params = {k: v for k, v in spec.items() if k != "type"}
    return make_entity(spec["type"], params, where, space)


ACTION_DELTAS: np.ndarray = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], dtype=np.int64)
"""Grid moves by action index: 0 stay, 1 up, 2 down, 3 left, 4 right, as (row, col) deltas."""


class GridEntity(Entity):
    """An entity on a grid that moves ``speed`` cells per step in the direction of its action."""

    speed = Param(1, int, low=0, high=8, doc="cells moved per step")
    sight = Param(16, int, low=0, doc="sees others within this Chebyshev distance")

    def update(self, action: Any, world: GridWorld) -> None:
        """Move ``speed`` cells in the action's direction (0 stay, 1 up, 2 down, 3 left, 4 right); walls stop it."""
        self.position = world.move(self.position, ACTION_DELTAS[int(action)], self.speed)


@register_entity("runner")
class Runner(GridEntity):
    """Flees chasers; caught when a chaser ends a step within its reach."""

    role = "runner"


@register_entity("chaser")
class Chaser(GridEntity):
    """Catches live runners within ``reach`` (Manhattan distance) after every entity has moved."""

    role = "chaser"
    reach = Param(1, int, low=0, high=8, doc="capture radius in cells (Manhattan distance)")

    def captures(self, other: Entity) -> bool:
        """A live runner within reach is caught."""
        if other.role != "runner" or not other.alive:
            return False
        dr, dc = (other.position - self.position).tolist()
        return abs(dr) + abs(dc) <= self.reach
