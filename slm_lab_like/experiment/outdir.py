"""The results directory of a run: a fresh data/<name>_<timestamp>/ under `--out`."""
from __future__ import annotations

import time
from pathlib import Path


class OutputDirError(OSError):
    """The results directory cannot be made where `--out` says (a one-line reason for the command line)."""


def new_out_dir(root: Path, name: str) -> Path:
    """data/<spec_name>_<timestamp>/ (a suffix _1, _2, ... when taken), made here: never one an earlier or a
    concurrent run made (mkdir claims it); OutputDirError when it cannot be made."""
    stamp = time.strftime("%Y_%m_%d_%H%M%S")
    base = Path(root) / f"{name}_{stamp}"
    path, k = base, 1
    while True:
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            path, k = Path(f"{base}_{k}"), k + 1
        except OSError as err:
            raise OutputDirError(f"--out {root}: cannot make the results directory {path}: {err.strerror or err}"
                                 ) from None
