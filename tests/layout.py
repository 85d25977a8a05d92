"""The installed layout, staged from the repository: pyproject's package-dir maps agents/, envs/ and spec/ to
slm_lab_like.agents, slm_lab_like.envs and slm_lab_like.specs, which import-linter and mypy cannot follow (they
read the file tree, not the editable install's import hook), so the code-health checks run on this copy."""
from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setuptools_config() -> dict:
    """pyproject.toml's [tool.setuptools] table."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def source_dir(package: str, package_dir: dict[str, str]) -> Path:
    """Where a package's files live in the repository: its own package-dir entry, else its nearest mapped parent's."""
    parts = package.split(".")
    for cut in range(len(parts), 0, -1):
        mapped = package_dir.get(".".join(parts[:cut]))
        if mapped is not None:
            return ROOT.joinpath(mapped, *parts[cut:])
    return ROOT.joinpath(*parts)


def stage(dest: Path) -> Path:
    """Copy every listed package's modules into `dest` as installed (dest/slm_lab_like/agents/...); returns dest."""
    config = setuptools_config()
    for package in config["packages"]:
        source, target = source_dir(package, config["package-dir"]), dest.joinpath(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for module in source.glob("*.py"):
            shutil.copy2(module, target / module.name)
    return dest
