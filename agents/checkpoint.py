"""Save and load an algorithm's state (nets, optimisers, normalisers, schedules via frame, RNGs) and, apart,
its replay memories, as plain torch files (tensors and plain containers) loaded with weights_only=True."""
from __future__ import annotations

import os

import torch

from slm_lab_like.agents.base import Algorithm


def save_agent(algo: Algorithm, path: str | os.PathLike) -> None:
    """Write `algo.state_dict()` to `path` (tensors and plain containers only)."""
    torch.save(algo.state_dict(), path)


def load_agent(algo: Algorithm, path: str | os.PathLike) -> None:
    """Restore `algo` from a file written by save_agent, loading with weights_only=True."""
    algo.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))


def save_memory(algo: Algorithm, path: str | os.PathLike) -> None:
    """Write `algo.memory_state_dict()` (its replay memories) to `path`."""
    torch.save(algo.memory_state_dict(), path)


def load_memory(algo: Algorithm, path: str | os.PathLike) -> None:
    """Restore `algo`'s replay memories from a file written by save_memory, loading with weights_only=True."""
    algo.load_memory_state_dict(torch.load(path, map_location="cpu", weights_only=True))
