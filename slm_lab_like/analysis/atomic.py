"""Atomic file writes: write a temporary file beside the target, then rename it over the target."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

_UMASK = os.umask(0o022)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK  # what open() would give a new file; mkstemp alone makes it private (0600)


def write_with(path: Path, writer: Callable[[str], None]) -> None:
    """Call writer(tmp_path) and move the result onto `path` atomically, so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        writer(tmp)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text(path: Path, text: str) -> None:
    """Write text atomically."""

    def put(tmp: str) -> None:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())

    write_with(path, put)


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (indented, keys in insertion order)."""
    write_text(path, json.dumps(data, indent=2, default=str) + "\n")
