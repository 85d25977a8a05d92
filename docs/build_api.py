"""Build the API reference from the docstrings with pdoc: `python docs/build_api.py [OUT]` (default docs/api/, which git
ignores); open OUT/index.html. Every module of the installed package is documented, `slm_lab_like.agents` and
`slm_lab_like.envs` included; a module of an extra that is not installed (Ray's backend without `ray`) is left out
with a note. Any warning pdoc gives (a docstring or annotation it cannot read) fails the build:
tests/test_docs.py builds it so."""
from __future__ import annotations

import importlib
import pkgutil
import sys
import warnings
from pathlib import Path

import pdoc

TOPS = ("slm_lab_like", "slm_lab_like.agents", "slm_lab_like.envs")
SKIPPED = ("slm_lab_like.specs",)  # spec files shipped as package data, not code


def modules() -> tuple[list[str], list[str]]:
    """(every importable module of the package, the modules left out for an extra that is not installed)."""
    found: set[str] = set()
    for top in TOPS:
        package = importlib.import_module(top)
        found.add(top)
        found.update(m.name for m in pkgutil.walk_packages(package.__path__, prefix=top + "."))
    names, missing = [], []
    for name in sorted(found):
        if name.startswith(SKIPPED):
            continue
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is None or e.name.startswith("slm_lab_like"):
                raise
            missing.append(f"{name} (needs {e.name})")
            continue
        names.append(name)
    return names, missing


def specs(names: list[str]) -> list[str]:
    """The module specs to give pdoc for `names`: pdoc documents a package's submodules itself, except those its
    `__all__` leaves out (slm_lab_like.agents exports the algorithm contract, not its modules), so those are named
    too, each once."""
    chosen: list[str] = []
    covered: set[str] = set()
    for name in names:
        if name not in covered:
            chosen.append(name)
            covered.update(pdoc.extract.walk_specs([name]))
    return chosen


def build(out: Path) -> tuple[int, list[str]]:
    """Write the HTML reference into `out`; (modules documented, modules left out). Warnings are errors."""
    names, missing = modules()
    pdoc.render.configure(docformat="markdown", show_source=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pdoc.pdoc(*specs(names), output_directory=out)
    return len(names), missing


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "api"
    pages, left_out = build(target)
    for note in left_out:
        print(f"left out: {note}")
    print(f"{pages} modules documented: {target / 'index.html'}")
