"""The lab-native kind: a LabEnv that lays out its body slots itself (e.g. a batch of games stepped as arrays): a
built-in one by its short name (`slm_lab_like.envs.make.register_lab_env`), a user's by `module:Class`."""
from __future__ import annotations

import difflib
import inspect
from typing import Any, Callable

from slm_lab_like.envs.adapter import BlockSig, EntryError, EnvAdapter, EnvEntry, Hosting, build_error
from slm_lab_like.envs.base import Clock, LabEnv
from slm_lab_like.envs.checker import LabEnvCheckError, check_lab_env
from slm_lab_like.envs.make import lab_env_factory
from slm_lab_like.envs.outputs import raised_at

CHECK_STEPS = 64  # steps of check_lab_env that `check` takes a lab-native env through


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
        unknown = _unknown_keyword(factory, entry.kwargs)
        if unknown:
            raise EntryError(f"kwargs.{unknown[0]}", unknown[1])
        try:
            inspect.signature(factory).bind(entry.name, n_slots, clock, entry.max_t, **entry.kwargs)
        except TypeError as err:  # the lab builds it as factory(name, n_slots, clock, max_t, **kwargs)
            raise EntryError("name", f'cannot build env "{entry.name}" as {_name(factory)}(name, n_slots, clock, '
                                     f"max_t, **kwargs): {err}") from None
        except ValueError:  # a signature that cannot be read (a builtin): the call says what is wrong
            pass
        try:
            return factory(entry.name, n_slots, clock, entry.max_t, **entry.kwargs)
        except TypeError as err:
            raise build_error(entry.name, entry.kwargs, err) from None
        except ValueError as err:
            raise EntryError("", str(err)) from None
        except Exception as err:  # the env's own constructor may fail in any way: one line, naming what raised
            raise EntryError("name", f'env "{entry.name}": building it raised {type(err).__name__}: {err}'
                                     f"{raised_at(err)}") from None

    def _probe(self, n_slots: int, plan: Any) -> list[BlockSig]:
        """The default probe (one build, reset and step), then the LabEnv contract itself: `check_lab_env` steps two
        builds of the entry's size side by side, so an env that breaks a promise (parity, frames, episode ends,
        buffers, seeding) is refused at `check` instead of running wrong or for ever."""
        sigs = super()._probe(n_slots, plan)
        try:
            check_lab_env(lambda: self.build(n_slots, Clock(max_frame=10**12), plan), steps=CHECK_STEPS)
        except LabEnvCheckError as err:
            raise EntryError("name", f"breaks the LabEnv contract: {err}") from None
        except EntryError:
            raise
        except Exception as err:  # the env's own reset or step, deeper into a run than the first step
            raise EntryError("name", f'env "{self.entry.name}": checking its contract, it raised '
                                     f"{type(err).__name__}: {err}{raised_at(err)}") from None
        return sigs

    def host(self) -> Hosting:
        raise EntryError("name", f'"{self.entry.name}" is a lab-native batch env and cannot be served; serve its '
                                 "single-game form (e.g. connect_four) instead")


def _unknown_keyword(factory: Callable[..., Any], kwargs: dict[str, Any]) -> tuple[str, str] | None:
    """(key, one-line reason) for the first `kwargs` key the factory's signature has no parameter for (with the
    parameter named closest), or None: also when the signature takes **kwargs or cannot be read."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    names = [n for n, p in list(params.items())[4:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    for key in kwargs:
        if key not in params:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f'; did you mean "{close[0]}"?' if close else (f"; it takes {', '.join(names)}" if names
                                                                 else "; it takes none")
            return key, f"unknown keyword of {_name(factory)}{hint}"
    return None


def _name(factory: Callable[..., Any]) -> str:
    """A factory's name for messages."""
    return getattr(factory, "__name__", type(factory).__name__)
