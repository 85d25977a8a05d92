"""The structure that keeps the lab sound, checked with the tests: import layers without circles
(import-linter's contracts in pyproject.toml), ruff's small bug-finding rule set, and a package list that ships
every package of the repository."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.layout import setuptools_config, source_dir, stage

ROOT = Path(__file__).resolve().parent.parent


def tool(name: str) -> str:
    path = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed; pip install -e '.[dev]'")
    return path


def test_import_layers_and_no_circles(tmp_path: Path) -> None:
    staged = stage(tmp_path)
    out = subprocess.run([tool("lint-imports"), "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=staged,
                         env={**os.environ, "PYTHONPATH": str(staged)}, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_every_package_ships() -> None:
    """A directory with an __init__.py under a shipped tree is in pyproject's package list (else the wheel drops it)."""
    config = setuptools_config()
    listed = {source_dir(p, config["package-dir"]) for p in config["packages"]}
    tops = [ROOT / d for d in config["package-dir"].values()]
    found = {init.parent for top in tops for init in top.rglob("__init__.py")}
    assert found - listed == set()


def test_ruff_finds_nothing() -> None:
    out = subprocess.run([tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:]
