"""The docs hold: the API reference builds from the docstrings without a warning, and every relative link of the
README and docs/ points at a file that exists (and a heading that exists, where it names one)."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def build_api():  # docs/build_api.py is a script, not a module of the package
    spec = importlib.util.spec_from_file_location("build_api", ROOT / "docs" / "build_api.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.long  # 8-30 s of the default run (5 min on 2 cores)
def test_the_api_reference_builds_without_warnings(tmp_path: Path) -> None:
    modules, left_out = build_api().build(tmp_path)
    for note in left_out:  # only a module whose extra is not installed may be left out
        needed = note.rpartition("(needs ")[2].rstrip(")").split(".")[0]
        assert importlib.util.find_spec(needed) is None, note
    assert modules > 100
    for page in ("slm_lab_like/agents/base.html", "slm_lab_like/envs/base.html", "slm_lab_like/envs/checker.html",
                 "slm_lab_like/remote/client.html", "slm_lab_like/spec/overrides.html"):
        assert (tmp_path / page).is_file(), page
    contract = (tmp_path / "slm_lab_like/agents/base.html").read_text()
    assert "Transition" in contract and "completed" in contract and "acting" in contract


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub makes of a markdown file's headings."""
    heads = re.findall(r"^#+ (.+)$", markdown, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_every_relative_link_of_the_docs_resolves() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken
