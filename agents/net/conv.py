"""ConvNet for image observations: conv layers -> flatten -> hidden layers -> linear heads."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

import gymnasium as gym
import torch
from torch import nn

from slm_lab_like.agents.base import space_text
from slm_lab_like.array_spaces import space_shape
from slm_lab_like.agents.net.base import (ACTIVATIONS, Activation, Net, NetConfig, OutHeads, head_gains, hidden_gain,
                                          init_layers, mlp, one_signature_problem, widths_problem)
from slm_lab_like.agents.net.mlp import single_signature

log = logging.getLogger("slm_lab_like")
DENSE_WARN = 10_000_000  # weights of the first dense layer past which a run is told its images are too large for it
_warned: set[tuple[int, int]] = set()  # (features, weights) already warned of in this process: once, not per net


@dataclass
class ConvNetConfig(NetConfig):
    """Conv layers as parallel lists (out channels, kernel sizes, strides, and zero `paddings`, none when empty), then
    `hid_layers` fully connected. Padding keeps a small board's size through several layers (kernel 3, padding 1)."""

    channels: list[int] = field(default_factory=lambda: [32, 64, 64])
    kernels: list[int] = field(default_factory=lambda: [8, 4, 3])
    strides: list[int] = field(default_factory=lambda: [4, 2, 1])
    paddings: list[int] = field(default_factory=list)
    hid_layers: list[int] = field(default_factory=lambda: [512])
    activation: Activation = "relu"


def paddings(config: ConvNetConfig) -> list[int]:
    """Each conv layer's zero padding (0 for every layer when `paddings` is empty)."""
    return list(config.paddings) or [0] * len(config.channels)


def image_layout(shape: Sequence[int]) -> tuple[int, bool]:
    """(channels, channels_last) of an image observation shape (H, W), (H, W, C) or (C, H, W)."""
    if len(shape) == 2:
        return 1, False
    if len(shape) != 3:
        raise ValueError(f"ConvNet needs image observations (H, W[, C]), got shape {tuple(shape)}")
    channels_last = shape[-1] <= 4 < shape[0]
    return (shape[-1] if channels_last else shape[0]), channels_last


def image_size(shape: Sequence[int]) -> tuple[int, int]:
    """(H, W) of an image observation shape (H, W), (H, W, C) or (C, H, W)."""
    if len(shape) == 2:
        return shape[0], shape[1]
    _, channels_last = image_layout(shape)
    return (shape[0], shape[1]) if channels_last else (shape[1], shape[2])


class ConvNet(Net):
    """Nature-DQN style conv net; uint8 pixels are scaled to [0, 1]."""

    Config = ConvNetConfig

    @classmethod
    def observation_problem(cls, config: Any, observation_spaces: Sequence[gym.Space]) -> str | None:
        """Box images of a single signature: (C, H, W), (H, W, C) or (H, W)."""
        problem = super().observation_problem(config, observation_spaces) or one_signature_problem(
            "ConvNet", observation_spaces)
        if problem or not observation_spaces or len(space_shape(observation_spaces[0])) in (2, 3):
            return problem
        return (f"net ConvNet needs image observations, a 3-D Box (C, H, W) or (H, W, C) or a 2-D (H, W); got "
                f"{space_text(observation_spaces[0])}; use MLP for vector observations")

    @classmethod
    def config_problem(cls, config: Any, observation_spaces: Sequence[gym.Space]) -> tuple[str, str] | None:
        """Conv lists of one length with values >= 1, and images large enough for every conv layer."""
        lengths = (len(config.channels), len(config.kernels), len(config.strides))
        if len(set(lengths)) > 1:
            return "channels", f"net.channels, net.kernels and net.strides must have the same length; got {lengths}"
        if config.paddings and len(config.paddings) != lengths[0]:
            return "paddings", (f"net.paddings must have one value per conv layer ({lengths[0]}) or be empty; got "
                                f"{len(config.paddings)}")
        if any(p < 0 for p in config.paddings):
            return "paddings", f"expected values >= 0; got {list(config.paddings)}"
        for key in ("channels", "kernels", "strides"):
            problem = widths_problem(key, getattr(config, key), "values")
            if problem:
                return problem
        if observation_spaces:
            image = image_size(space_shape(observation_spaces[0]))
            h, w = image
            for i, (k, s, p) in enumerate(zip(config.kernels, config.strides, paddings(config))):
                if h + 2 * p < k or w + 2 * p < k:
                    return "kernels", (f"conv layer {i} (kernel {k}) gets a {h}x{w} input from the "
                                       f"{image[0]}x{image[1]} image; use smaller kernels or strides, paddings, or "
                                       "fewer layers")
                h, w = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        return super().config_problem(config, observation_spaces)

    def __init__(self, config: ConvNetConfig, in_shapes: Sequence[tuple[int, ...]],
                 out_dims: Sequence[Sequence[int]], out_gains: Sequence[float] | None = None) -> None:
        super().__init__()
        single_signature("ConvNet", in_shapes, out_dims)
        if not (len(config.channels) == len(config.kernels) == len(config.strides)):
            raise ValueError("net.channels, net.kernels and net.strides must have the same length")
        shape = tuple(in_shapes[0])
        in_ch, self.channels_last = image_layout(shape)
        self.add_channel = len(shape) == 2
        layers: list[nn.Module] = []
        for ch, k, s, p in zip(config.channels, config.kernels, config.strides, paddings(config)):
            layers += [nn.Conv2d(in_ch, ch, k, s, p), ACTIVATIONS[config.activation]()]
            in_ch = ch
        self.conv = nn.Sequential(*layers, nn.Flatten())
        with torch.no_grad():
            n_flat = self.conv(self._layout(torch.zeros((1,) + shape))).shape[1]
        self.fc, width = mlp(n_flat, config.hid_layers, config.activation)
        dense = n_flat * (config.hid_layers[0] if config.hid_layers else 1)
        if dense > DENSE_WARN and (n_flat, dense) not in _warned:
            _warned.add((n_flat, dense))
            h, w = image_size(shape)
            log.warning("net ConvNet: its conv layers leave %d features of a %dx%d image, a first dense layer of %.1fM "
                        "weights (slow to train and to save); downscale the observations, or add or widen the strides of "
                        "conv layers (net.channels, net.kernels, net.strides)", n_flat, h, w, dense / 1e6)
        init_layers(self.conv, config.init, hidden_gain(config))
        init_layers(self.fc, config.init, hidden_gain(config))
        self.out = OutHeads(width, out_dims[0], config.init, head_gains(config, out_gains, len(out_dims[0])))

    def _layout(self, x: torch.Tensor) -> torch.Tensor:
        """Batch of images as float (B, C, H, W)."""
        if x.dtype == torch.uint8:
            x = x.float() / 255.0
        if self.add_channel:
            return x.unsqueeze(1)
        return x.permute(0, 3, 1, 2) if self.channels_last else x

    def forward(self, x: torch.Tensor, sig: int = 0) -> list[torch.Tensor]:
        """Head outputs for a batch of images."""
        return self.out(self.fc(self.conv(self._layout(x))))
