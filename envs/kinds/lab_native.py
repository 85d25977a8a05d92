"""The lab-native kind: a LabEnv that lays out its body slots itself (e.g. a batch of games stepped as arrays): a
built-in one by its short name (`slm_lab_like.envs.make.register_lab_env`), a user's by `module:Class`."""
from __future__ import annotations

from typing import Any

from slm_lab_like.envs.adapter import EntryError, EnvAdapter, EnvEntry, Hosting
from slm_lab_like.envs.base import Clock, LabEnv
from slm_lab_like.envs.make import lab_env_factory


class LabNative(EnvAdapter):
    """A LabEnv factory `factory(name, n_slots, clock, max_t, **kwargs)`: a LabEnv subclass, or a built-in's."""

    kind = "lab-native batch"
    priority = 20

    @classmethod
    def claims(cls, entry: EnvEntry) -> bool:
        return entry.remote is None and lab_env_factory(entry.name) is not None

    def body_options_problem(self) -> str | None:
        return f'"{self.entry.name}" takes no per-body options: it places its bodies itself, in slot order'

    def build(self, n_slots: int, clock: Clock, plan: Any = None) -> LabEnv:
        entry = self.entry
        factory = lab_env_factory(entry.name)
        assert factory is not None
        try:
            return factory(entry.name, n_slots, clock, entry.max_t, **entry.kwargs)
        except TypeError as err:
            raise EntryError("kwargs", f'cannot build env "{entry.name}": {err}') from None
        except ValueError as err:
            raise EntryError("", str(err)) from None

    def host(self) -> Hosting:
        raise EntryError("name", f'"{self.entry.name}" is a lab-native batch env and cannot be served; serve its '
                                 "single-game form (e.g. connect_four) instead")
