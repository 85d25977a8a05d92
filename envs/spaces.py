"""Observation spaces as agents take them: Box stays Box; every other gymnasium space is flattened to a float32
Box with gymnasium's own space utilities (Discrete one-hot, MultiDiscrete one-hot per component, MultiBinary
as 0/1, Tuple and Dict concatenated), so every algorithm meets every standard space through one kind of input.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from slm_lab_like.array_spaces import ARRAY_SPACES

FLATTENABLE = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary, gym.spaces.Tuple,
               gym.spaces.Dict)


class SpaceError(ValueError):
    """A space the lab cannot hold in its buffers, with a one-line reason."""


def flat_box(space: gym.Space) -> gym.spaces.Box:
    """The float32 Box that `flatten_observation(space, ...)` values live in."""
    flat = gym.spaces.flatten_space(space)
    assert isinstance(flat, gym.spaces.Box)
    return gym.spaces.Box(flat.low.astype(np.float32), flat.high.astype(np.float32), dtype=np.float32)


def flatten_observation(space: gym.Space, value: Any) -> np.ndarray:
    """One observation of `space` as a flat float32 array (one-hot for discrete parts)."""
    return np.asarray(gym.spaces.flatten(space, value), dtype=np.float32)


def observation_converter(space: gym.Space, where: str) -> tuple[gym.Space, Callable[[Any], Any] | None]:
    """(the space agents see, the conversion of one raw observation or None when it is used as it is)."""
    if isinstance(space, gym.spaces.Box):
        return space, None
    if _flattenable(space):
        return flat_box(space), partial(flatten_observation, space)
    raise SpaceError(f"{where}: observation space {type(space).__name__} cannot be flattened into an array; "
                     "use Box, Discrete, MultiDiscrete, MultiBinary, or Tuple / Dict of these")


def mask_layout(space: gym.Space, action_space: gym.Space) -> tuple[gym.spaces.Box, slice, slice] | None:
    """For a game's Dict observation {"observation", "action_mask"} over Discrete actions: the Box agents see (the
    observation's own, flattened) and where it and the legal-action mask lie in the flattened whole; else None."""
    if not (isinstance(space, gym.spaces.Dict) and set(space.spaces) == {"observation", "action_mask"}
            and isinstance(action_space, gym.spaces.Discrete)):
        return None
    where, start = {}, 0
    for key, sub in space.spaces.items():  # gymnasium flattens a Dict as its parts, in this order
        where[key] = slice(start, start + gym.spaces.flatdim(sub))
        start = where[key].stop
    if where["action_mask"].stop - where["action_mask"].start != int(action_space.n):
        return None
    return flat_box(space["observation"]), where["observation"], where["action_mask"]


def check_action_space(space: gym.Space, where: str) -> None:
    """SpaceError unless the lab's buffers can hold actions of `space`."""
    if not isinstance(space, ARRAY_SPACES):
        raise SpaceError(f"{where}: action space {type(space).__name__} is not supported; expected Discrete, Box, "
                         "MultiDiscrete or MultiBinary")


def _flattenable(space: gym.Space) -> bool:
    if isinstance(space, gym.spaces.Tuple):
        return all(_flattenable(s) or isinstance(s, gym.spaces.Box) for s in space.spaces)
    if isinstance(space, gym.spaces.Dict):
        return all(_flattenable(s) or isinstance(s, gym.spaces.Box) for s in space.spaces.values())
    return isinstance(space, FLATTENABLE)


class FlatObservation(gym.ObservationWrapper):
    """A gymnasium env whose observations are flattened into a float32 Box (see the module doc)."""

    def __init__(self, env: gym.Env, convert: Callable[[Any], Any]) -> None:
        super().__init__(env)
        self.observation_space = flat_box(env.observation_space)
        self._convert = convert

    def observation(self, observation: Any) -> np.ndarray:
        return self._convert(observation)


def lab_view(env: gym.Env, where: str) -> gym.Env:
    """`env` as the lab steps it: flattened observations where its space is not a Box; SpaceError when its
    observation or action space cannot be held."""
    check_action_space(env.action_space, where)
    _, convert = observation_converter(env.observation_space, where)
    return env if convert is None else FlatObservation(env, convert)
