"""Atomic writes: readers see the old file or the new one, never half, and new files get the usual mode."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from slm_lab_like.analysis.atomic import write_json, write_text, write_with


def test_written_file_has_the_mode_open_would_give(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    os.umask(mask)
    write_json(tmp_path / "x.json", {"a": 1})
    assert stat.S_IMODE((tmp_path / "x.json").stat().st_mode) == 0o666 & ~mask


def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    write_text(target, "old")

    def broken(tmp: str) -> None:
        Path(tmp).write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_with(target, broken)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
