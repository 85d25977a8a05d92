"""Save and load an algorithm's state (nets, optimisers, normalisers, schedules via frame) with plain torch files."""
from __future__ import annotations

import os

import torch

from agents.base import Algorithm


def save_agent(algo: Algorithm, path: str | os.PathLike) -> None:
    """Write `algo.state_dict()` to `path` (tensors and plain containers only)."""
    torch.save(algo.state_dict(), path)


def load_agent(algo: Algorithm, path: str | os.PathLike) -> None:
    """Restore `algo` from a file written by save_agent, loading with weights_only=True."""
    algo.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
