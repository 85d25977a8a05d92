"""The lab as a user installs it: `pip install .` (not editable) into a fresh venv at the declared minimum
versions of its dependencies, beside a distribution that puts a top-level `agents` and `envs` on the path; both
import, `slm-lab` finds its shipped specs from any directory, and the quick tests pass at the floors."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.version import Version

from tests.layout import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.xdist_group("install")]  # one venv for the module

TORCH = "torch==2.13.0"  # the CPU build on these machines' disk; PyPI's Linux builds pull gigabytes of CUDA
TEST_TOOLS = ["pytest>=8", "pytest-timeout>=2.2", "pytest-xdist>=3.5", "hypothesis>=6.90"]
QUICK_TESTS = ["test_spec.py", "test_spaces_session.py", "test_native_vector.py", "test_multiagent_adapters.py",
               "test_remote_single.py", "test_env_checker.py", "test_session.py", "test_telemetry.py"]
FAKE = {  # a distribution of someone else's: top-level packages named like the lab's repository folders
    "pyproject.toml": '[project]\nname = "someone-elses-agents"\nversion = "1.0"\n'
                      '[tool.setuptools]\npackages = ["agents", "envs"]\n',
    "agents/__init__.py": 'OWNER = "someone else"\n',
    "envs/__init__.py": 'OWNER = "someone else"\n',
}


def floors() -> list[str]:
    """The declared minimum of every runtime dependency and of the pettingzoo, render and mpe extras, pinned
    (`numpy==1.24`); where two name one package, the higher."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    declared = project["dependencies"] + extras["pettingzoo"] + extras["render"] + extras["mpe"]
    assert all(">=" in d for d in declared if not d.startswith("torch")), f"every dependency declares a floor: {declared}"
    floor: dict[str, tuple[Version, str]] = {}  # a package two extras name is pinned at the higher floor
    for d in declared:
        name, version = (part.strip() for part in d.split(">="))
        if name != "torch" and (name not in floor or Version(version) > floor[name][0]):
            floor[name] = (Version(version), version)
    return [f"{name}=={version}" for name, (_, version) in floor.items()]


def run(cmd: list[str], cwd: Path, timeout: float = 600) -> str:
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                         env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    assert out.returncode == 0, f"{' '.join(cmd)}\n{out.stdout[-8000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def source_copy(dest: Path) -> Path:
    """The repository's tracked and new files (not .venv, data or builds), as a clean clone would have them."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.split()
    for name in listed:
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the lab (pip install ., not editable) at its dependency floors, and the other dist."""
    root = tmp_path_factory.mktemp("install")
    run([sys.executable, "-m", "venv", str(root / "venv")], root)
    pip = [str(root / "venv" / "bin" / "python"), "-m", "pip", "install", "-q"]
    run(pip + [TORCH], root)
    run(pip + floors() + TEST_TOOLS, root)
    run(pip + ["--no-deps", str(source_copy(root / "src"))], root)
    fake = root / "fake"
    for name, text in FAKE.items():
        (fake / name).parent.mkdir(parents=True, exist_ok=True)
        (fake / name).write_text(text)
    run(pip + ["--no-deps", str(fake)], root)
    return root


def test_installs_beside_a_top_level_agents_package(venv: Path) -> None:
    python = str(venv / "venv" / "bin" / "python")
    out = run([python, "-c", "import agents, envs, slm_lab_like.agents, slm_lab_like.envs, slm_lab_like.specs; "
                             "print(agents.OWNER, envs.OWNER, slm_lab_like.agents.__file__)"], venv)
    assert out.startswith("someone else someone else ") and "site-packages/slm_lab_like/agents" in out


def test_slm_lab_finds_shipped_specs_from_any_directory(venv: Path, tmp_path: Path) -> None:
    slm_lab = str(venv / "venv" / "bin" / "slm-lab")
    assert run([slm_lab, "check", "demo"], tmp_path).splitlines() == ["demo: demo: ok", "demo: random: ok"]
    run([slm_lab, "check", "benchmark/ppo_cartpole"], tmp_path)
    out = run([slm_lab, "demo", "--mode", "test", "--out", str(tmp_path / "data")], tmp_path)
    assert "demo: agent ppo in CartPole-v1" in out and (tmp_path / "data").is_dir()


def test_render_and_mpe_share_one_pygame(venv: Path, tmp_path: Path) -> None:
    """The render and mpe extras together: pip finds no conflict, the one `pygame` is pygame-ce, and it draws both
    gymnasium's CartPole and mpe2's simple_spread_v3 (a lab spec over mpe2 runs too)."""
    python = str(venv / "venv" / "bin" / "python")
    run([python, "-m", "pip", "check"], venv)
    code = ("import importlib.metadata as md, gymnasium as gym, pygame; from mpe2 import simple_spread_v3\n"
            "e = gym.make('CartPole-v1', render_mode='rgb_array'); e.reset(seed=0); a = e.render()\n"
            "m = simple_spread_v3.parallel_env(render_mode='rgb_array'); m.reset(seed=0); b = m.render()\n"
            "names = {d.metadata['Name'].lower() for d in md.distributions()}\n"
            "print(pygame.IS_CE, 'pygame' in names, a.shape, b.shape)")
    assert run([python, "-c", code], tmp_path).split() == ["1", "False", "(400,", "600,", "3)", "(700,", "700,", "3)"]
    slm_lab = str(venv / "venv" / "bin" / "slm-lab")
    out = run([slm_lab, "mpe/simple_spread_central", "--mode", "test", "--out", str(tmp_path / "data")], tmp_path)
    assert "agent team in mpe2.simple_spread_v3:parallel_env" in out


def test_quick_tests_pass_at_the_dependency_floors(venv: Path) -> None:
    """The repository's tests (copied away from the source, so they import the installed package) at the floors."""
    work = venv / "tests_at_floors"
    shutil.copytree(ROOT / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "run_lab.py"):  # pytest's settings and markers; the command line some tests run
        shutil.copy2(ROOT / name, work / name)
    shutil.copytree(ROOT / "spec", work / "spec", ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    pytest_bin = str(venv / "venv" / "bin" / "pytest")
    # one process: beside the suite's own workers, two more overload 2 cores (test_remote_single failed once so)
    run([pytest_bin, "-q", "-n", "0", "-p", "no:cacheprovider", *[f"tests/{t}" for t in QUICK_TESTS]], work)
