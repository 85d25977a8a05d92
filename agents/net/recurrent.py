"""Recurrent: flattened observation -> hidden layers -> a GRU or LSTM -> one linear output per head; a memory per body.

A recurrent net carries a state per body from step to step. Its caller keeps those states (a flat (bodies,
state_size) array: an LSTM's h and c side by side) and hands them in with the observations through `Seq`: each
sequence's state before its first step and, for sequences of different lengths padded to one, their lengths (torch's
packed sequences: one call of the GRU or LSTM over all of them). Training unrolls stored sequences from their stored
initial states (agents.onpolicy).
"""
# No `from __future__ import annotations` here: classes of this module are subclassed or built elsewhere (dataclass
# and NamedTuple __init__ methods), and string annotations would then resolve only in this module's namespace, not
# where the API reference and typing.get_type_hints read them.

from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Sequence

import gymnasium as gym
import torch
from torch import nn

from slm_lab_like.agents.net.base import (Net, NetConfig, OutHeads, flat_dim, head_gains, hidden_gain, init_layers, mlp,
                                          one_signature_problem)
from slm_lab_like.agents.net.mlp import single_signature


class Seq(NamedTuple):
    """What a recurrent net takes beside observations (T, B, ...): `state` (B, state_size), each sequence's state
    before its first step; `lengths` (B,), how many steps each sequence holds (the rest of its T rows is padding;
    None: all T)."""

    state: torch.Tensor
    lengths: torch.Tensor | None = None


@dataclass
class RecurrentConfig(NetConfig):
    """`cell`: GRU or LSTM; `hid_layers`: the layers before it; `rnn_hidden`, `rnn_layers`: its width and depth;
    `seq_len`: the length of the sequences training unrolls from stored states (PPO's minibatches are sets of them;
    None: each body's whole rollout)."""

    cell: Literal["GRU", "LSTM"] = "GRU"
    hid_layers: list[int] = field(default_factory=lambda: [64])
    rnn_hidden: int = field(default=64, metadata={"min": 1})
    rnn_layers: int = field(default=1, metadata={"min": 1})
    seq_len: int | None = field(default=None, metadata={"min": 1})


class Recurrent(Net):
    """An MLP, then a GRU or LSTM, then the heads, for vector observations (other Box shapes are flattened)."""

    Config = RecurrentConfig
    recurrent = True

    @classmethod
    def observation_problem(cls, config: Any, observation_spaces: Sequence[gym.Space]) -> str | None:
        """Box observations of a single signature."""
        return (super().observation_problem(config, observation_spaces)
                or one_signature_problem("Recurrent", observation_spaces))

    def __init__(self, config: RecurrentConfig, in_shapes: Sequence[tuple[int, ...]],
                 out_dims: Sequence[Sequence[int]], out_gains: Sequence[float] | None = None) -> None:
        super().__init__()
        single_signature("Recurrent", in_shapes, out_dims)
        self.body, width = mlp(flat_dim(in_shapes[0]), config.hid_layers, config.activation)
        init_layers(self.body, config.init, hidden_gain(config))
        self.lstm = config.cell == "LSTM"
        self.layers, self.hidden = config.rnn_layers, config.rnn_hidden
        self.rnn = (nn.LSTM if self.lstm else nn.GRU)(width, config.rnn_hidden, config.rnn_layers)
        if config.init == "orthogonal":
            for name, param in self.rnn.named_parameters():
                nn.init.orthogonal_(param) if name.startswith("weight") else nn.init.zeros_(param)
        self.out = OutHeads(config.rnn_hidden, out_dims[0], config.init,
                            head_gains(config, out_gains, len(out_dims[0])))

    @property
    def state_size(self) -> int:
        """The width of one body's flat state (an LSTM's h and c side by side)."""
        return self.layers * self.hidden * (2 if self.lstm else 1)

    def forward(self, x: torch.Tensor, sig: int = 0, seq: Seq | None = None) -> list[torch.Tensor]:
        """Head outputs (T * B rows, step-major) for observations (T, B, ...) from `seq`'s states (zero without)."""
        return self.unroll(x, sig, seq)[0]

    def unroll(self, x: torch.Tensor, sig: int = 0, seq: Seq | None = None) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Head outputs for observations (T, B, ...), one row per step held (step-major: row order of
        x[:T][mask], mask the steps within each sequence's length), and the state after each sequence's last step."""
        T, B = x.shape[0], x.shape[1]
        h = self.body(x.reshape(T * B, -1).float()).reshape(T, B, -1)
        state = self._unflat(torch.zeros(B, self.state_size, device=x.device) if seq is None else seq.state)
        if seq is None or seq.lengths is None:
            out, carried = self.rnn(h, state)
            return self.out(out.reshape(T * B, -1)), self._flat(carried)
        lengths = seq.lengths.cpu()
        packed = nn.utils.rnn.pack_padded_sequence(h, lengths, enforce_sorted=False)
        out, carried = self.rnn(packed, state)
        padded, _ = nn.utils.rnn.pad_packed_sequence(out)
        held = torch.arange(padded.shape[0])[:, None] < lengths[None, :]
        return self.out(padded[held.to(padded.device)]), self._flat(carried)

    def _unflat(self, state: torch.Tensor) -> Any:
        """(B, state_size) as torch's (layers, B, hidden) state, or an LSTM's (h, c) pair."""
        s = state.reshape(state.shape[0], -1, self.hidden).transpose(0, 1).contiguous()
        return (s[:self.layers], s[self.layers:]) if self.lstm else s

    def _flat(self, carried: Any) -> torch.Tensor:
        s = torch.cat(carried) if self.lstm else carried
        return s.transpose(0, 1).reshape(s.shape[1], -1)
