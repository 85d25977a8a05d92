"""A session directory brought from the node that runs it to the lab's own directory, a change at a time: no shared
disk is assumed between a Ray session's node and the driver.

`DirShipper` lists what changed in a directory since its last call: a file that grew in place (same inode: the
metric and train CSVs, appended as episodes end) as its new bytes, any other new or rewritten file whole, a file
gone as its deletion. `apply_changes` writes them into another directory: whole files atomically, the checkpoint
manifest after every other file of the batch (so the copy's last committed checkpoint is always whole there too),
deletions last.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from slm_lab_like.analysis.atomic import write_with
from slm_lab_like.experiment.checkpoint import MANIFEST

GONE = -1  # the offset of a deletion
Change = tuple[str, int, bytes]  # (path relative to the directory, offset its bytes go at, the bytes)


class DirShipper:
    """The changes of the files under `root` since the last `changes()` (the first call: every file)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.sent: dict[str, tuple[int, int, int]] = {}  # path -> (inode, bytes sent, mtime_ns) as last shipped

    def prime(self) -> None:
        """Take the files there now as shipped already (they came from the side the changes go to)."""
        for rel, st in self._files():
            self.sent[rel] = (st.st_ino, st.st_size, st.st_mtime_ns)

    def changes(self) -> list[Change]:
        """Every file that is new, grew or was replaced since the last call, and every file gone since then."""
        out: list[Change] = []
        seen = set()
        for rel, st in self._files():
            seen.add(rel)
            old = self.sent.get(rel)
            if old is not None and old == (st.st_ino, st.st_size, st.st_mtime_ns):
                continue
            offset = old[1] if old is not None and old[0] == st.st_ino and st.st_size > old[1] else 0
            try:
                with open(self.root / rel, "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except FileNotFoundError:  # replaced or deleted between the listing and the read: next call
                continue
            self.sent[rel] = (st.st_ino, offset + len(data), st.st_mtime_ns)
            out.append((rel, offset, data))
        for rel in sorted(set(self.sent) - seen):
            del self.sent[rel]
            out.append((rel, GONE, b""))
        return out

    def _files(self) -> list[tuple[str, os.stat_result]]:
        """(relative path, stat) of every plain file under the root but the atomic writers' temporary ones."""
        found = []
        for path in sorted(self.root.rglob("*")) if self.root.is_dir() else ():
            if path.name.startswith(".") and path.name.endswith(".tmp"):
                continue
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            if path.is_file():
                found.append((path.relative_to(self.root).as_posix(), st))
        return found


def apply_changes(root: Path, changes: list[Change]) -> None:
    """Write `changes` (from a DirShipper) under `root`: files, then the checkpoint manifest, then deletions."""
    root = Path(root)
    ordered = ([c for c in changes if c[1] != GONE and c[0] != MANIFEST] + [c for c in changes if c[0] == MANIFEST
                                                                             and c[1] != GONE]
               + [c for c in changes if c[1] == GONE])
    for rel, offset, data in ordered:
        path = _inside(root, rel)
        if offset == GONE:
            path.unlink(missing_ok=True)
            _prune(root, path.parent)
        elif offset == 0:
            write_with(path, _writer(data))
        else:
            with open(path, "r+b") as f:
                f.seek(offset)
                f.write(data)
                f.truncate()


def _writer(data: bytes) -> Callable[[str], None]:
    """A write_with writer of `data`."""
    def write(tmp: str) -> None:
        Path(tmp).write_bytes(data)
    return write


def pack_dir(root: Path) -> list[Change]:
    """Every file under `root`, whole: what a fresh node needs to go on from this copy."""
    return DirShipper(root).changes()


def _inside(root: Path, rel: str) -> Path:
    """`root / rel`, refused when `rel` would leave `root` (the names come from another process)."""
    path = (root / rel).resolve()
    if not path.is_relative_to(root.resolve()):
        raise ValueError(f"a shipped file outside the session directory: {rel!r}")
    return path


def _prune(root: Path, folder: Path) -> None:
    """Remove `folder` and its parents up to `root` while they are empty (a deleted checkpoint's folder)."""
    root = root.resolve()
    while folder != root and folder.is_relative_to(root) and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent
