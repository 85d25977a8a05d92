"""Hydra: an input head and output heads per observation/action signature around one shared trunk (multi-task)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import gymnasium as gym
import torch
from torch import nn

from slm_lab_like.agents.net.base import (Net, NetConfig, OutHeads, flat_dim, head_gains, hidden_gain, init_layers, mlp,
                                          widths_problem)


@dataclass
class HydraConfig(NetConfig):
    """`in_layers`: each signature's own input head; `hid_layers`: the shared trunk."""

    in_layers: list[int] = field(default_factory=lambda: [64])
    hid_layers: list[int] = field(default_factory=lambda: [64])


class Hydra(Net):
    """Per-signature input MLP -> shared trunk -> per-signature output heads."""

    Config = HydraConfig

    @classmethod
    def config_problem(cls, config: Any, observation_spaces: Sequence[gym.Space]) -> tuple[str, str] | None:
        """Trunk and input-head widths >= 1, and at least one input layer."""
        if not config.in_layers:
            return "in_layers", "expected at least one layer, so that the signatures meet in the trunk"
        return widths_problem("in_layers", config.in_layers) or super().config_problem(config, observation_spaces)

    def __init__(self, config: HydraConfig, in_shapes: Sequence[tuple[int, ...]],
                 out_dims: Sequence[Sequence[int]], out_gains: Sequence[float] | None = None) -> None:
        super().__init__()
        if len(in_shapes) != len(out_dims):
            raise ValueError("Hydra needs one output spec per input signature")
        if not config.in_layers:
            raise ValueError("net.in_layers must name at least one layer so that signatures meet in the trunk")
        heads = [mlp(flat_dim(s), config.in_layers, config.activation) for s in in_shapes]
        self.in_heads = nn.ModuleList(h for h, _ in heads)
        self.trunk, width = mlp(config.in_layers[-1], config.hid_layers, config.activation)
        init_layers(self.in_heads, config.init, hidden_gain(config))
        init_layers(self.trunk, config.init, hidden_gain(config))
        self.out_heads = nn.ModuleList(OutHeads(width, dims, config.init, head_gains(config, out_gains, len(dims))) for dims in out_dims)

    def forward(self, x: torch.Tensor, sig: int = 0) -> list[torch.Tensor]:
        """Head outputs of signature `sig` for a batch of its observations."""
        x = x.reshape(x.shape[0], -1)
        if x.dtype != torch.float32:
            x = x.float()
        h = self.in_heads[sig](x)
        return self.out_heads[sig](self.trunk(h))
