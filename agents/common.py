"""Helpers shared by the algorithms: group signatures, space shapes, observation preparation, net building."""
from __future__ import annotations

from typing import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from agents.base import BodyGroup
from agents.net.base import NetConfig
from agents.normalizer import ObsNormalizer


def group_signatures(groups: Sequence[BodyGroup]) -> tuple[list[int], list[tuple[gym.Space, gym.Space]]]:
    """Signature index of each group and the (observation, action) spaces of each distinct signature."""
    sigs: list[tuple[gym.Space, gym.Space]] = []
    of_group: list[int] = []
    for g in groups:
        for i, (o, a) in enumerate(sigs):
            if o == g.observation_space and a == g.action_space:
                of_group.append(i)
                break
        else:
            sigs.append((g.observation_space, g.action_space))
            of_group.append(len(sigs) - 1)
    return of_group, sigs


def obs_shape(space: gym.Space) -> tuple[int, ...]:
    """Shape of a Box observation; other observation spaces are rejected with a clear message."""
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(f"observation space {space} is not supported; agents take Box observations")
    return tuple(space.shape)


def stored_obs_dtype(space: gym.Space, normalize: bool) -> np.dtype:
    """dtype observations are stored in: uint8 images stay uint8 (nets scale them), the rest float32."""
    return np.dtype(np.uint8) if space.dtype == np.uint8 and not normalize else np.dtype(np.float32)


def prepare_obs(obs: np.ndarray, normalizer: ObsNormalizer | None, update: bool) -> np.ndarray:
    """Observations as the nets take them: normalised when configured, else float32 (uint8 images kept)."""
    if normalizer is not None:
        return normalizer(obs, update)
    if obs.dtype == np.float32 or obs.dtype == np.uint8:
        return obs
    return obs.astype(np.float32)


def build_net(net_cls: type, config: NetConfig, in_shapes: Sequence[tuple[int, ...]],
              out_dims: Sequence[Sequence[int]], out_gains: Sequence[float] | None = None) -> nn.Module:
    """Instantiate a registered net class for these input signatures and output heads."""
    return net_cls(config, in_shapes, out_dims, out_gains)


def to_tensor(x: np.ndarray, device: torch.device) -> torch.Tensor:
    """A tensor over the same memory on CPU (no copy), or a copy on the device."""
    t = torch.from_numpy(np.ascontiguousarray(x))
    return t if device.type == "cpu" else t.to(device, non_blocking=True)

