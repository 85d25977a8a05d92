"""What an env gives back, checked once before a run: one seeded reset and one step of a probe env must return
what gymnasium's API and the env's own spaces promise, in a form the lab's buffers hold (`check_outputs`, a
gymnasium env), or must go through the lab's env of any other kind (`check_lab_outputs`: a PettingZoo env's
players, a lab-native env). A user's env that breaks this (an old gym 4-tuple step, an observation of another
shape than its space, a step that raises) is then a one-line error at `check`, not a traceback in a run."""
from __future__ import annotations

import os
from numbers import Real
from typing import Any

import gymnasium as gym
import numpy as np

from slm_lab_like.envs.base import LabEnv
from slm_lab_like.envs.checker import random_actions
from slm_lab_like.envs.spaces import SpaceError

STEP_FIELDS = "(observation, reward, terminated, truncated, info)"


def check_outputs(env: gym.Env, where: str) -> None:
    """SpaceError naming what broke when `env` (as the lab steps it, observations flattened) does not reset to
    ``(observation, info)`` or step a sampled action to a 5-tuple with a real reward and an observation its
    observation space's buffer can hold. Leaves the env stepped once."""
    result = _call(env.reset, where, "reset(seed=0)", seed=0)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise SpaceError(f"{where}: reset() returned {_shape_of(result)}; a gymnasium env returns (observation, info)")
    _fits(env.observation_space, result[0], where, "reset()")
    env.action_space.seed(0)
    result = _call(env.step, where, "step(a sampled action)", env.action_space.sample())
    if not (isinstance(result, tuple) and len(result) == 5):
        hint = "; an old gym env (obs, reward, done, info) needs updating to gymnasium's API" if (
            isinstance(result, tuple) and len(result) == 4) else ""
        raise SpaceError(f"{where}: step() returned {_shape_of(result)}; a gymnasium env returns {STEP_FIELDS}{hint}")
    obs, reward = result[0], result[1]
    _fits(env.observation_space, obs, where, "step()")
    if not isinstance(reward, (Real, np.number)) or isinstance(reward, (bool, np.bool_)):
        raise SpaceError(f"{where}: step() returned a reward of type {type(reward).__name__}; expected a real number")


def check_lab_outputs(env: LabEnv, where: str) -> None:
    """SpaceError naming what raised when the lab's `env` cannot be reset (seed 0) and stepped once with seeded
    random actions, legal ones where masks are given (its players' observations written into its buffers)."""
    _call(env.reset, where, "reset(seed=0)", seed=0)
    for blk, act in zip(env.blocks, random_actions(env, np.random.default_rng(0))):
        blk.action[...] = act
    _call(env.step, where, "the first step")


def _call(method: Any, where: str, what: str, *args: Any, **kwargs: Any) -> Any:
    """``method(*args, **kwargs)``, or a SpaceError naming the exception it raised (the env's own code)."""
    try:
        return method(*args, **kwargs)
    except Exception as err:  # a user's env may fail in any way: one line, with what the lab was doing
        raise SpaceError(f"{where}: {what} raised {type(err).__name__}: {err}{raised_at(err)}") from None


def raised_at(err: BaseException) -> str:
    """Where `err` was raised, as ` (at FILE:LINE)` for a one-line message: the innermost frame of its traceback."""
    tb = err.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    return f" (at {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno})"


def _fits(space: gym.Space, obs: Any, where: str, what: str) -> None:
    """SpaceError unless `obs` can be written into a buffer of `space` (a Box: its shape, numpy's casting)."""
    if not isinstance(space, gym.spaces.Box):
        return
    slot = np.zeros(space.shape, space.dtype)
    try:
        slot[...] = obs
    except (ValueError, TypeError) as err:
        found = np.shape(obs) if isinstance(obs, (np.ndarray, list, tuple)) else type(obs).__name__
        raise SpaceError(f"{where}: {what} returned an observation of shape {found} that does not fit its "
                         f"observation space {space} ({err})") from None


def _shape_of(result: Any) -> str:
    return f"a {len(result)}-tuple" if isinstance(result, tuple) else f"a {type(result).__name__}"
