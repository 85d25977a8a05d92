"""One env layer: an adapter is one kind of env entry; envs.registry decides an entry's kind, once.

An adapter is one kind of env entry (gymnasium copies, PettingZoo parallel, PettingZoo AEC, lab-native
batch, remote judge). Every part of the lab that needs to know what an entry is asks its adapter:
- `body_options_problem()`: whether bodies in it may take per-body options (players, entities);
- `plan(options, wheres)`: the body mapping checked and resolved (players per body), SlotError otherwise;
- `probe(n_slots, plan)`: the slot blocks' spaces, from one build, whose reset and first step are tried
  (`envs.outputs`: an env that breaks its API or its spaces is refused at `check`);
- `build(n_slots, clock, plan)`: the LabEnv for the session;
- `host()`: how a judge hosts the entry's env (factory and API), EntryError when it cannot be hosted;
- `metadata()`: the env's render modes and frame rate.
An adapter makes each body plan and each probe once and reuses it.
Adapters raise EntryError with the key inside the entry (`name`, `kwargs`, `remote`, ...) so the spec layer
can name the whole JSON path.
"""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Protocol, Sequence

import gymnasium as gym

from slm_lab_like.envs.base import Clock, LabEnv
from slm_lab_like.envs.outputs import check_lab_outputs
from slm_lab_like.envs.spaces import SpaceError


class EnvEntry(Protocol):
    """What an adapter reads of a spec env entry (slm_lab_like.spec.schema.EnvSpec has these fields). Read-only, so
    frozen dataclasses and narrower field types (EnvSpec's literal `vector`) match."""

    @property
    def name(self) -> str: ...
    @property
    def kwargs(self) -> dict[str, Any]: ...
    @property
    def max_t(self) -> int | None: ...
    @property
    def vector(self) -> str: ...
    @property
    def remote(self) -> Any: ...  # the judge the bodies connect to (only the remote kind reads it), or None


class EntryError(ValueError):
    """A one-line problem with an env entry; `key` is the path inside the entry ("" for the entry itself)."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}" if key else message)


def build_error(name: str, kwargs: dict[str, Any], err: Exception) -> EntryError:
    """An env constructor's failure as one line at the key it points to: the keyword argument it refused
    (`kwargs.KEY`), else `kwargs` when any were given, else `name`."""
    found = re.search(r"unexpected keyword argument '(\w+)'", str(err))
    key = "kwargs" if kwargs else "name"
    if found and found.group(1) in kwargs:
        key = f"kwargs.{found.group(1)}"
    return EntryError(key, f'cannot build env "{name}": {type(err).__name__}: {err}')


@dataclass(frozen=True)
class BlockSig:
    """The spaces of slots [start, stop) of a built env, as agents will see them."""

    start: int
    stop: int
    observation_space: gym.Space
    action_space: gym.Space
    masked: bool = False
    turns: bool = False


def block_sigs(env: LabEnv) -> list[BlockSig]:
    """The block signatures of a built LabEnv."""
    return [BlockSig(b.start, b.stop, b.observation_space, b.action_space, b.action_mask is not None,
                     b.acting is not None) for b in env.blocks]


@dataclass(frozen=True)
class Hosting:
    """How a judge hosts an entry's env: `make()` builds one env; `api` is "single", "parallel" or "aec"."""

    make: Callable[[], Any]
    api: str


class EnvAdapter(ABC):
    """One kind of env entry (see the module doc); envs.registry lists the kinds."""

    kind: ClassVar[str]
    priority: ClassVar[int] = 0  # in the registry, higher claims first
    copies: ClassVar[bool] = False  # whether its bodies are copies of a single-agent env, each alone in its episodes

    def __init__(self, entry: EnvEntry) -> None:
        self.entry = entry
        self._planned: dict[str, Any] = {}
        self._probed: dict[tuple[int, str], list[BlockSig]] = {}

    @classmethod
    @abstractmethod
    def claims(cls, entry: EnvEntry) -> bool:
        """Whether an entry is of this kind."""

    def body_options_problem(self) -> str | None:
        """Why bodies in this env cannot take per-body options (None when they can)."""
        return (f'per-body options are for multi-agent envs; "{self.entry.name}" is a {self.kind} env whose '
                "bodies it places itself")

    def plan(self, options: Sequence[dict[str, Any]], wheres: Sequence[str]) -> Any:
        """The checked body mapping of `len(options)` bodies (None for kinds without one), made once and reused."""
        key = repr((options, wheres))
        if key not in self._planned:
            self._planned[key] = self._plan(options, wheres)
        return self._planned[key]

    def _plan(self, options: Sequence[dict[str, Any]], wheres: Sequence[str]) -> Any:
        return None

    def probe(self, n_slots: int, plan: Any = None) -> list[BlockSig]:
        """The slot blocks' spaces for `n_slots` bodies, probed once per (n_slots, plan) and reused."""
        key = (n_slots, repr(plan))
        if key not in self._probed:
            self._probed[key] = self._probe(n_slots, plan)
        return self._probed[key]

    def _probe(self, n_slots: int, plan: Any) -> list[BlockSig]:
        """By default: build the env once with a one-frame clock, read its blocks, and reset and step it once (an
        env whose reset or step fails is an error at `name` now, not in the run)."""
        env = self.build(n_slots, Clock(max_frame=1), plan)
        try:
            sigs = block_sigs(env)
            check_lab_outputs(env, f'env "{self.entry.name}"')
            return sigs
        except SpaceError as err:
            raise EntryError("name", str(err)) from None
        finally:
            env.close()

    @abstractmethod
    def build(self, n_slots: int, clock: Clock, plan: Any = None) -> LabEnv:
        """The LabEnv for `n_slots` bodies."""

    @abstractmethod
    def host(self) -> Hosting:
        """How a judge hosts this env; EntryError when it cannot be hosted."""

    def metadata(self) -> dict[str, Any]:
        """The env's metadata (its class's): `render_modes`, `render_fps`."""
        return {}
