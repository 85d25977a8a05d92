"""Save and load an algorithm's state (nets, optimisers, normalisers, schedules via frame, RNGs) and, apart,
its replay memories, as plain torch files (tensors and plain containers) loaded with weights_only=True."""
from __future__ import annotations

import io
import os

import torch

from slm_lab_like.agents.base import Algorithm


def save_agent(algo: Algorithm, path: str | os.PathLike) -> None:
    """Write `algo.state_dict()` to `path` once it loads back as the lab loads it (weights_only): a state holding
    anything else (a numpy array, an object) is a ValueError naming what, here, not a resume that fails later."""
    buffer = io.BytesIO()
    torch.save(algo.state_dict(), buffer)
    buffer.seek(0)
    try:
        torch.load(buffer, map_location="cpu", weights_only=True)
    except Exception as err:  # torch's unpickler names the first type it refused, in a line of its long message
        lines = [line.strip() for line in str(err).splitlines()]
        why = next((line for line in lines if "Unsupported global" in line), lines[0] if lines else type(err).__name__)
        raise ValueError(f"{type(algo).__name__}.state_dict() holds what a checkpoint cannot load back (tensors, "
                         f"numbers, strings, and lists and dicts of them load; a numpy array becomes "
                         f"torch.as_tensor(...)): {why.split(' was not an allowed global')[0]}") from None
    with open(path, "wb") as f:
        f.write(buffer.getbuffer())


def load_agent(algo: Algorithm, path: str | os.PathLike) -> None:
    """Restore `algo` from a file written by save_agent, loading with weights_only=True."""
    algo.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))


def save_memory(algo: Algorithm, path: str | os.PathLike) -> None:
    """Write `algo.memory_state_dict()` (its replay memories) to `path`."""
    torch.save(algo.memory_state_dict(), path)


def load_memory(algo: Algorithm, path: str | os.PathLike) -> None:
    """Restore `algo`'s replay memories from a file written by save_memory, loading with weights_only=True."""
    algo.load_memory_state_dict(torch.load(path, map_location="cpu", weights_only=True))
