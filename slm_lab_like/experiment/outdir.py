"""The results directory of a run: a fresh data/<name>_<timestamp>/ under `--out`."""
from __future__ import annotations

import time
from pathlib import Path


class OutputDirError(OSError):
    """The results directory cannot be made where `--out` says (a one-line reason for the command line)."""


def new_out_dir(root: Path, name: str) -> Path:
    """data/<spec_name>_<timestamp>/, never reusing an existing directory; OutputDirError when it cannot be made."""
    stamp = time.strftime("%Y_%m_%d_%H%M%S")
    path = Path(root) / f"{name}_{stamp}"
    k = 1
    while path.exists():
        path = Path(root) / f"{name}_{stamp}_{k}"
        k += 1
    try:
        path.mkdir(parents=True)
    except OSError as err:
        raise OutputDirError(f"--out {root}: cannot make the results directory {path}: {err.strerror or err}"
                             ) from None
    return path
