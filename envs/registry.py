"""The registry of env kinds: `adapter_for(entry)` is the one place where an env entry's kind is decided.

The built-in kinds are listed here; a layer above the env layer adds its own with `register_adapter` (the lab's
remote kind does). Kinds are asked in priority order, the first that claims an entry takes it, and an entry's
adapter is made once per process (cached by the entry's repr) so its plans and probes are reused.
"""
from __future__ import annotations

from slm_lab_like.envs.adapter import EntryError, EnvAdapter, EnvEntry
from slm_lab_like.envs.kinds.envpool_vector import Envpool
from slm_lab_like.envs.kinds.gym_copies import GymCopies
from slm_lab_like.envs.kinds.gym_native import GymNative
from slm_lab_like.envs.kinds.lab_native import LabNative
from slm_lab_like.envs.kinds.pettingzoo import PettingZooAEC, PettingZooParallel
from slm_lab_like.envs.make import check_name

ADAPTERS: list[type[EnvAdapter]] = sorted(
    [LabNative, PettingZooParallel, PettingZooAEC, Envpool, GymNative, GymCopies], key=lambda c: -c.priority)
_CACHE: dict[str, EnvAdapter] = {}


def register_adapter(cls: type[EnvAdapter]) -> type[EnvAdapter]:
    """Add an env kind (usable as a class decorator); higher priority claims first."""
    if cls not in ADAPTERS:
        ADAPTERS.append(cls)
        ADAPTERS.sort(key=lambda c: -c.priority)
        _CACHE.clear()
    return cls


def adapter_for(entry: EnvEntry) -> EnvAdapter:
    """The adapter of an env entry; EntryError at `name` when no kind takes it."""
    key = repr(entry)
    if key not in _CACHE:
        cls = next((c for c in ADAPTERS if c.claims(entry)), None)
        if cls is None:
            raise EntryError("name", check_name(entry.name) or f'no env kind takes "{entry.name}"')
        _CACHE[key] = cls(entry)
    return _CACHE[key]
