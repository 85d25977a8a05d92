"""Helpers shared by the algorithms: group signatures, space shapes, observation preparation, net building."""
from __future__ import annotations

from typing import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from slm_lab_like.agents.base import BodyGroup, space_text
from slm_lab_like.agents.net.base import NetConfig, net_problem
from slm_lab_like.agents.normalizer import ObsNormalizer


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


def prepare_obs(obs: np.ndarray, normalizer: ObsNormalizer | None, update: bool,
                rows: np.ndarray | None = None) -> np.ndarray:
    """Observations as the nets take them: normalised when configured, else float32 (uint8 images kept).
    With `update`, the statistics take the `rows` that act now (None: all), not bodies waiting their turn."""
    if normalizer is not None:
        return normalizer(obs, update, rows)
    if obs.dtype == np.float32 or obs.dtype == np.uint8:
        return obs
    return obs.astype(np.float32)


def zero_based_problem(name: str, space: gym.Space) -> str | None:
    """Why learner `name` cannot act in a Discrete / MultiDiscrete space whose actions do not start at 0, or None."""
    if np.all(np.asarray(getattr(space, "start", 0)) == 0):
        return None
    return f"{name} takes actions that start at 0; got {space_text(space)}; wrap the env to shift its actions"


def build_net(net_cls: type, config: NetConfig, observation_spaces: Sequence[gym.Space],
              out_dims: Sequence[Sequence[int]], out_gains: Sequence[float] | None = None) -> nn.Module:
    """Instantiate a registered net class for these signatures (one observation space each) and output heads;
    ValueError naming the net's field when the net cannot take them (the check agents.compat runs)."""
    problem = net_problem(net_cls, config, observation_spaces)
    if problem:
        raise ValueError(f"net.{problem[0]}: {problem[1]}")
    return net_cls(config, [obs_shape(o) for o in observation_spaces], out_dims, out_gains)


def restore_generator(gen: torch.Generator, state: torch.Tensor) -> None:
    """Set `gen` to a saved state. A state of another device's generator (a net trained on a GPU, played on a CPU)
    leaves `gen` as seeded: CPU and CUDA generators keep states of different kinds, and playing draws nothing."""
    if state.numel() == gen.get_state().numel():
        gen.set_state(state)


def to_tensor(x: np.ndarray, device: torch.device) -> torch.Tensor:
    """A tensor over the same memory on CPU (no copy), or a copy on the device."""
    t = torch.from_numpy(np.ascontiguousarray(x))
    return t if device.type == "cpu" else t.to(device, non_blocking=True)

