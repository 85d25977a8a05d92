"""The spec's shape as dataclasses: what each key means, its type, its default and its bounds."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from agents.base import ComponentSpec


@dataclass
class AgentSpec:
    """One agent: an algorithm (a registry name and its hyperparameters) with its memory and net."""

    name: str
    algorithm: ComponentSpec
    memory: ComponentSpec | None = None
    net: ComponentSpec | None = None


@dataclass
class EnvSpec:
    """One env: a gymnasium id or `module:Class`, its budget and its episode limit."""

    name: str
    max_frame: int | None = field(default=None, metadata={"min": 1})
    max_episode: int | None = field(default=None, metadata={"min": 1})
    max_t: int | None = field(default=None, metadata={"min": 1})
    kwargs: dict[str, Any] = field(default_factory=dict)
    vector: Literal["sync", "async"] = "sync"


@dataclass
class BodySpec:
    """How bodies are placed: every agent in every env (outer), agent i with env i (inner), or listed (custom)."""

    product: Literal["outer", "inner", "custom"] = "outer"
    num: int | list[int] = 1
    coords: list[list[int]] | None = None


@dataclass
class MetaSpec:
    """Session-level settings."""

    max_session: int = field(default=1, metadata={"min": 1})
    max_trial: int = field(default=1, metadata={"min": 1})
    random_seed: int | None = field(default=None, metadata={"min": 0})
    log_frequency: int = field(default=10_000, metadata={"min": 1})


@dataclass
class Spec:
    """A whole, validated spec. `search` keeps the raw search block; see slm_lab_like.spec.search."""

    name: str
    agent: list[AgentSpec]
    env: list[EnvSpec]
    body: BodySpec = field(default_factory=BodySpec)
    meta: MetaSpec = field(default_factory=MetaSpec)
    search: dict[str, Any] = field(default_factory=dict)
