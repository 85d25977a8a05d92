"""MLP: flattened observation -> hidden layers -> one linear output per head."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import gymnasium as gym
import torch

from slm_lab_like.agents.net.base import (Net, NetConfig, OutHeads, flat_dim, head_gains, hidden_gain, init_layers, mlp,
                                          one_signature_problem)


def single_signature(name: str, in_shapes: Sequence[tuple[int, ...]], out_dims: Sequence[Sequence[int]]) -> None:
    """Reject several observation/action signatures for nets that have one input and one output."""
    if len(in_shapes) != 1 or len(out_dims) != 1:
        raise ValueError(f"net {name} serves one observation/action signature, got {len(in_shapes)}; "
                         "use net Hydra for an agent whose bodies live in envs of different spaces")


@dataclass
class MLPConfig(NetConfig):
    """An MLP's config: the common net fields (hid_layers, activation, optim, ...)."""


class MLP(Net):
    """Fully connected net for vector observations (other Box shapes are flattened); one signature."""

    Config = MLPConfig

    @classmethod
    def observation_problem(cls, config: Any, observation_spaces: Sequence[gym.Space]) -> str | None:
        """Box observations of a single signature."""
        return (super().observation_problem(config, observation_spaces)
                or one_signature_problem("MLP", observation_spaces))

    def __init__(self, config: MLPConfig, in_shapes: Sequence[tuple[int, ...]],
                 out_dims: Sequence[Sequence[int]], out_gains: Sequence[float] | None = None) -> None:
        super().__init__()
        single_signature("MLP", in_shapes, out_dims)
        self.body, width = mlp(flat_dim(in_shapes[0]), config.hid_layers, config.activation)
        init_layers(self.body, config.init, hidden_gain(config))
        self.out = OutHeads(width, out_dims[0], config.init, head_gains(config, out_gains, len(out_dims[0])))
        self.flatten = len(in_shapes[0]) != 1

    def forward(self, x: torch.Tensor, sig: int = 0) -> list[torch.Tensor]:
        """Head outputs for a batch of observations of signature `sig` (always 0 here)."""
        if self.flatten:
            x = x.reshape(x.shape[0], -1)
        if x.dtype != torch.float32:
            x = x.float()
        return self.out(self.body(x))
