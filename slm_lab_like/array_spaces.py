"""The gymnasium spaces the lab holds as arrays (Discrete, Box, MultiDiscrete, MultiBinary) and their shapes: one
definition below both agents and envs, which may not import each other."""
from __future__ import annotations

import gymnasium as gym

ARRAY_SPACES: tuple[type[gym.Space], ...] = (gym.spaces.Discrete, gym.spaces.Box, gym.spaces.MultiDiscrete,
                                             gym.spaces.MultiBinary)


def space_shape(space: gym.Space) -> tuple[int, ...]:
    """The shape of an array space (Box, MultiDiscrete, MultiBinary; Discrete's is ()); gymnasium types `Space.shape`
    Optional for the spaces without one (Tuple, Dict, ...), which raise TypeError here as `tuple(None)` would."""
    shape = space.shape
    if shape is None:
        raise TypeError(f"{type(space).__name__} has no shape")
    return shape
