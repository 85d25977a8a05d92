"""The structure that keeps the lab sound, checked with the tests: import layers without circles
(import-linter's contracts in pyproject.toml), ruff's small bug-finding rule set, mypy over the whole installed
package ([tool.mypy] in pyproject.toml), and a package list that ships every package of the repository."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.layout import setuptools_config, source_dir, stage, to_repository_paths

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
    """A directory with an __init__.py under a shipped tree, or with a spec file under spec/, is in pyproject's package
    list (else the wheel drops it), and a spec folder's JSON is its package data."""
    config = setuptools_config()
    listed = {source_dir(p, config["package-dir"]) for p in config["packages"]}
    tops = [ROOT / d for d in config["package-dir"].values()]
    found = {init.parent for top in tops for init in top.rglob("__init__.py")}
    assert found - listed == set()
    spec_dirs = {path.parent for path in (ROOT / "spec").rglob("*.json")}
    assert spec_dirs - listed == set()
    data = {source_dir(p, config["package-dir"]) for p, globs in config["package-data"].items() if "*.json" in globs}
    assert spec_dirs - data == set()


def test_ruff_finds_nothing() -> None:
    out = subprocess.run([tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:]


@pytest.mark.slow
def test_mypy_finds_nothing(tmp_path: Path) -> None:
    """mypy with pyproject's [tool.mypy] on the staged installed layout; a failure names the repository's files.

    The cache lives in the repository's .mypy_cache, not in tmp_path: the staged copies keep their files' times, so
    a later run rechecks only what changed (about 2 s instead of 20 s of CPU)."""
    staged = stage(tmp_path / "staged")
    out = subprocess.run([tool("mypy"), "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir",
                          str(ROOT / ".mypy_cache"), "--no-color-output", "-p", "slm_lab_like"],
                         cwd=staged, env={**os.environ, "MYPYPATH": str(staged), "PYTHONPATH": str(staged)},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, to_repository_paths(out.stdout[-8000:] + out.stderr[-2000:], staged)


def test_the_env_and_agent_layers_load_no_zeromq() -> None:
    """Importing the env layer (or the agents, or the built-in registries' parts) loads no ZeroMQ and no judge: a
    user's env or algorithm module that imports them stays light; the remote kind joins at the spec layer."""
    code = ("import sys, slm_lab_like.envs, slm_lab_like.envs.registry, slm_lab_like.envs.make, slm_lab_like.agents; "
            "from slm_lab_like.agents import ALGORITHMS; ALGORITHMS.get('PPO'); "
            "print(sorted(m for m in sys.modules if m == 'zmq' or m.startswith(('zmq.', 'slm_lab_like.remote'))))")
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "[]"
    assert "zmq" not in out.stderr  # -X importtime lists every module imported, nested ones too


# Not permissive, allowed only where named: pygame-ce (LGPL) is the renderer of gymnasium's classic-control envs and
# of mpe2's, loaded unmodified as a library by the optional `render` and `mpe` extras; no other way renders them.
LESSER_GPL_ALLOWED = {"pygame-ce": ("render", "mpe")}


def test_dependencies_are_permissively_licensed() -> None:
    """Every installed distribution the lab requires, with every extra, transitively: no GPL or AGPL package, and a
    Lesser GPL one only where LESSER_GPL_ALLOWED names it and only through its optional extra."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    project = {e: [Requirement(r) for r in md.distribution("slm_lab_like").requires or [] if f'extra == "{e}"' in r]
               for e in ("dev", "ray", "render", "envpool", "pettingzoo", "mpe")}
    core = [Requirement(r) for r in md.distribution("slm_lab_like").requires or [] if "extra ==" not in r]
    licenses: dict[str, tuple[str, str]] = {}  # name -> (license text, the extra that brought it, or "core")

    def walk(req: Requirement, via: str) -> None:
        name = req.name.lower().replace("_", "-")
        if name in licenses:
            return
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:  # an extra's package not installed here
            return
        meta = dist.metadata
        named = meta.get("License") or ""  # a license's name; some packages put its whole text here: the classifiers
        text = " | ".join([meta.get("License-Expression") or "", named if len(named) < 100 else "",
                           *[c for c in meta.get_all("Classifier") or [] if c.startswith("License")]])
        licenses[name] = (text, via)
        for child in dist.requires or []:
            sub = Requirement(child)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in ("", *req.extras)):
                walk(sub, via)

    for req in core:
        walk(req, "core")
    for extra, reqs in project.items():
        for req in reqs:
            walk(req, extra)
    assert len(licenses) > 30
    strong = {n: t for n, (t, _) in licenses.items() if re.search(r"(?<!L)GPL|(?<!Lesser )General Public", t)
              and not re.search(r"LGPL|Lesser", t)}
    assert not strong, strong
    lesser = {n: via for n, (t, via) in licenses.items() if re.search(r"LGPL|Lesser General Public", t)}
    assert all(via in LESSER_GPL_ALLOWED.get(n, ()) for n, via in lesser.items()), lesser


def test_the_extras_ask_for_one_pygame() -> None:
    """pygame and pygame-ce install into one `pygame` package, so an env with both is broken by whichever came last:
    mpe2 takes pygame-ce, so every extra of the lab that renders takes pygame-ce too, and none takes pygame."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    wanted = [Requirement(r) for r in md.distribution("slm_lab_like").requires or []]
    names = {r.name.lower() for r in wanted}
    assert "pygame" not in names and "pygame-ce" in names
    if importlib.util.find_spec("mpe2") is not None:
        mpe_wants = {Requirement(r).name.lower() for r in md.distribution("mpe2").requires or []}
        assert "pygame-ce" in mpe_wants and "pygame" not in mpe_wants


def test_the_package_declares_its_license_and_its_types() -> None:
    """MIT in the metadata and its text shipped; py.typed shipped, so users' type checkers read the lab's hints."""
    import importlib.metadata as md
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    meta = project["project"]
    assert meta["license"] == "MIT" and (ROOT / meta["license-files"][0]).read_text().startswith("MIT License")
    assert "Typing :: Typed" in meta["classifiers"]
    assert project["tool"]["setuptools"]["package-data"]["slm_lab_like"] == ["py.typed"]
    assert (ROOT / "slm_lab_like" / "py.typed").is_file()
    assert md.metadata("slm_lab_like")["License-Expression"] == "MIT"  # the installed distribution says so too


def test_ci_installs_and_tests_as_the_readme_says() -> None:
    """.ci/run runs the README's quick-start install, step for step, then exactly the README's test command."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme.split("## Quick start", 1)[1].split("\n## ", 1)[0], re.S)
    install, test = blocks[0].strip(), blocks[1].strip()
    steps = [s.strip() for s in install.split("&&")]
    assert steps[-1] == "python run_lab.py"  # the demo: the README's main job
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))]
    assert ci == steps[:-1] + [test]
