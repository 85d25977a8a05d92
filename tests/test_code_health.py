"""The structure that keeps the lab sound, checked with the tests: import layers without circles
(import-linter's contracts in pyproject.toml) and ruff's small bug-finding rule set."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def tool(name: str) -> str:
    path = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed; pip install -e '.[dev]'")
    return path


def test_import_layers_and_no_circles() -> None:
    out = subprocess.run([tool("lint-imports")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_ruff_finds_nothing() -> None:
    out = subprocess.run([tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:]
