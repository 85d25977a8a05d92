"""Make envs from a spec name: a gymnasium id (`module:EnvId-v0` too: the module registers it, as in
`gym.make`), `module:Class`, a built-in env, or a multi-agent env.

Multi-agent envs (PettingZoo parallel or turn-based AEC) are built-in names registered with
`register_multiagent`, or `module:attr` naming a ParallelEnv/AECEnv subclass or a PettingZoo-style
factory function (`parallel_env` -> parallel; `env` / `raw_env` -> AEC). Lab-native envs (LabEnv
subclasses that lay out their body slots themselves, e.g. a batch of games) register with
`register_lab_env`.
"""
from __future__ import annotations

import difflib
import importlib
import types
from typing import Any, Callable

import gymnasium as gym

from slm_lab_like.envs.base import LabEnv
from slm_lab_like.import_path import import_object, is_import_path

MULTIAGENT: dict[str, tuple["str | Callable[..., Any]", str]] = {}
MULTIAGENT_APIS = ("parallel", "aec")
LAB_ENVS: dict[str, "str | Callable[..., Any]"] = {}


def register_multiagent(name: str, factory: "str | Callable[..., Any]", api: str) -> None:
    """Offer a multi-agent env under a short name; `factory` is a callable or a lazy `module:attr` path."""
    if api not in MULTIAGENT_APIS:
        raise ValueError(f"api must be one of {MULTIAGENT_APIS}, got {api!r}")
    MULTIAGENT[name] = (factory, api)


def register_lab_env(name: str, factory: "str | Callable[..., Any]") -> None:
    """Offer a LabEnv under a short name; `factory(name, n_slots, clock, max_t, **kwargs)` (or its lazy
    `module:attr` path) builds it with one slot per body placed in the env entry. A user's LabEnv needs no name:
    a spec names its class as `module:Class`."""
    LAB_ENVS[name] = factory


def lab_env_factory(name: str) -> Callable[..., Any] | None:
    """The factory of the lab-native env `name` (a short name offered here, or `module:Class` of a LabEnv subclass),
    or None when `name` is not one."""
    factory = LAB_ENVS.get(name)
    if factory is None and is_import_path(name):
        try:
            factory = import_object(name)
        except ValueError:
            return None
        return factory if isinstance(factory, type) and issubclass(factory, LabEnv) else None
    return import_object(factory) if isinstance(factory, str) else factory


def gym_id(name: str) -> str | None:
    """The gymnasium id `name` makes: itself when registered, or for `module:EnvId` (gymnasium's own form) the id
    the module registers when imported, where the module has no attribute of that name; else None."""
    if name in gym.registry:
        return name
    module_name, sep, env_id = name.partition(":")
    if not sep or not module_name or not env_id:
        return None
    try:
        module = importlib.import_module(module_name)
    except Exception:  # not a module this process can import: not a gymnasium id either (import_object says why)
        return None
    return env_id if not hasattr(module, env_id) and env_id in gym.registry else None


def multiagent_api(name: str) -> str | None:
    """"parallel" or "aec" when `name` makes a multi-agent env, None for a single-agent gymnasium env."""
    if name in MULTIAGENT:
        return MULTIAGENT[name][1]
    if ":" not in name or gym_id(name) is not None:
        return None
    try:
        obj = import_object(name)
    except ValueError:
        return None
    try:
        from pettingzoo import AECEnv, ParallelEnv
    except ImportError:
        return None
    if isinstance(obj, type):
        return "parallel" if issubclass(obj, ParallelEnv) else "aec" if issubclass(obj, AECEnv) else None
    attr = name.rpartition(":")[2]
    return "parallel" if attr == "parallel_env" else "aec" if attr in ("env", "raw_env") else None


def multiagent_factory(name: str) -> Callable[..., Any]:
    """The callable that builds the multi-agent env `name` (lazy built-in paths are imported here)."""
    factory = MULTIAGENT[name][0] if name in MULTIAGENT else name
    return import_object(factory) if isinstance(factory, str) else factory


def check_name(name: str) -> str | None:
    """None if `name` can be made, else a one-line reason with a did-you-mean hint."""
    if name in MULTIAGENT or name in LAB_ENVS or gym_id(name) is not None:
        return None
    if ":" in name:
        try:
            import_object(name)
        except ValueError as e:
            return str(e)
        return None
    namespace = name.partition("/")[0] if "/" in name else None
    if namespace is not None and not any(k.startswith(namespace + "/") for k in gym.registry):
        return f'unknown env "{name}": namespace "{namespace}" is not registered; {_namespace_hint(namespace, name)}'
    known = list(gym.registry) + list(MULTIAGENT) + list(LAB_ENVS)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f'; did you mean "{close[0]}"?' if close else ("; use a gymnasium id (module:EnvId when a module registers "
                                                          "it), a built-in env or module:Class")
    return f'unknown env "{name}"{hint}'


def _namespace_hint(namespace: str, name: str) -> str:
    """How to get the envs of a gymnasium namespace no installed module has registered."""
    if namespace == "ALE":
        return (f'pip install ale-py and name it "ale_py:{name}" (importing ale_py registers the Atari envs), or use '
                f'envpool\'s "{name.partition("/")[2]}" with vector: "envpool"')
    return f'name the module that registers it before the id, as "module:{name}"'


def env_creator(name: str) -> Any:
    """What builds the single-agent env `name` (class or factory), whose `metadata` lists its render modes."""
    registered = gym_id(name)
    if registered is not None:
        from gymnasium.envs.registration import load_env_creator

        entry_point = gym.registry[registered].entry_point
        return load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    return import_object(name)


def creator_metadata(creator: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The metadata (`render_modes`, `render_fps`) of the envs `creator` makes: its own where it is a class or
    carries one, else that of one env it makes with `kwargs` (a factory function, such as PettingZoo's `env`), or
    {} when that fails."""
    meta = getattr(creator, "metadata", None)
    if meta is None and callable(creator) and not isinstance(creator, type):
        try:
            env = creator(**kwargs)
        except Exception:  # the env's own constructor; a failing one has no render modes to offer
            return {}
        meta = getattr(env, "metadata", None)
        close = getattr(env, "close", None)
        if callable(close):
            close()
    return dict(meta) if isinstance(meta, dict) else {}


def module_hint(found: Any) -> str:
    """Where an env name led to a module holding an env factory (PettingZoo's `env`, `parallel_env`), the name of
    that factory as a hint; else nothing."""
    if not isinstance(found, types.ModuleType):
        return ""
    factories = [f for f in ("env", "parallel_env") if callable(getattr(found, f, None))]
    return f'; did you mean "{found.__name__}:{factories[0]}"?' if factories else ""


def make_gym(name: str, max_t: int | None = None, **kwargs: Any) -> gym.Env:
    """One gymnasium env; `max_t` (when given) replaces its own episode step limit."""
    registered = gym_id(name)
    if registered is not None:
        return gym.make(registered, max_episode_steps=max_t, disable_env_checker=True, **kwargs)
    creator = env_creator(name)
    if isinstance(creator, type) and not issubclass(creator, gym.Env):
        raise ValueError(f'"{name}" is not an env: {creator.__name__} is not a gymnasium.Env subclass')
    if not callable(creator):
        raise ValueError(f'"{name}" is not an env: a {type(creator).__name__}, expected a gymnasium.Env subclass'
                         + module_hint(creator))
    env = creator(**kwargs)
    if not isinstance(env, gym.Env):
        raise ValueError(f'env "{name}" is not a gymnasium.Env (got {type(env).__name__})')
    return gym.wrappers.TimeLimit(env, max_t) if max_t else env


def peel_time_limit(env: gym.Env) -> tuple[gym.Env, int | None]:
    """Remove the outermost TimeLimit / OrderEnforcing layers of `env` and return the step limit.

    The lab counts every episode's steps itself, so it applies the limit directly and saves two
    wrapper calls per step; wrappers below those layers (an env's own preprocessing) stay.
    """
    limit = None
    while isinstance(env, (gym.wrappers.TimeLimit, gym.wrappers.OrderEnforcing)):
        if isinstance(env, gym.wrappers.TimeLimit):
            limit = env._max_episode_steps if limit is None else min(limit, env._max_episode_steps)
        env = env.env
    return env, limit


register_multiagent("connect_four", "slm_lab_like.envs.games.connect_four:ConnectFourEnv", "aec")
register_multiagent("connect_four_parallel", "slm_lab_like.envs.games.connect_four:ConnectFourParallelEnv", "parallel")
register_multiagent("tag_arena", "slm_lab_like.envs.games.tag_arena:TagArenaEnv", "parallel")
register_multiagent("spread", "slm_lab_like.envs.games.spread:SpreadEnv", "parallel")
register_lab_env("connect_four_batch", "slm_lab_like.envs.games.connect_four_batch:ConnectFourBatchEnv")
