"""The installed layout, staged from the repository: pyproject's package-dir maps agents/, envs/ and spec/ to
slm_lab_like.agents, slm_lab_like.envs and slm_lab_like.specs, which import-linter and mypy cannot follow (they
read the file tree, not the editable install's import hook), so the code-health checks run on this copy."""
from __future__ import annotations

import re
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


def installed_files() -> dict[str, Path]:
    """Every listed package's module as installed (`slm_lab_like/agents/ppo.py`) -> its file in the repository."""
    config = setuptools_config()
    files = {}
    for package in config["packages"]:
        source = source_dir(package, config["package-dir"])
        for module in sorted(source.glob("*.py")):
            files["/".join([*package.split("."), module.name])] = module
    return files


def stage(dest: Path) -> Path:
    """Copy every listed package's modules into `dest` as installed (dest/slm_lab_like/agents/...); returns dest."""
    for installed, source in installed_files().items():
        target = dest / installed
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return dest


def to_repository_paths(text: str, staged: Path | None = None) -> str:
    """A tool's report on the staged copy with each installed path (relative, or under `staged`) written as the
    repository's path (`slm_lab_like/agents/ppo.py:12:` -> `agents/ppo.py:12:`), so a failure points at the file
    to edit."""
    files = installed_files()
    prefix = re.escape(str(staged).rstrip("/") + "/") if staged is not None else ""
    pattern = re.compile(rf"(?<![\w/.])(?:{prefix})?(slm_lab_like/[\w/]+\.py)\b")

    def repo_path(match: re.Match[str]) -> str:
        source = files.get(match.group(1))
        return str(source.relative_to(ROOT)) if source is not None else match.group(0)

    return pattern.sub(repo_path, text)
