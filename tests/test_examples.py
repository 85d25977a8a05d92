"""The examples the docs walk through, run as their readers run them: a user's algorithm in a module beside its spec
(examples/write_an_algorithm, docs/write-an-algorithm.md), checked, trained, killed and resumed from its directory."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import kill_lab_at

ROOT = Path(__file__).resolve().parent.parent
ALGORITHM = ROOT / "examples" / "write_an_algorithm"
SPEC = "tiny_ppo_cartpole.json"


def lab(*args: str, cwd: Path = ALGORITHM, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run_lab.py"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def test_a_user_algorithm_beside_its_spec_is_checked(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """check from the example's directory, as the tutorial runs it (the lab imports modules from there)."""
    import sys

    from slm_lab_like.cli import main

    elsewhere = lab("check", str(ALGORITHM / SPEC), cwd=ROOT)  # its module is not importable from there
    assert elsewhere.returncode == 2 and 'cannot import module "tiny_ppo"' in elsewhere.stderr
    monkeypatch.chdir(ALGORITHM)
    monkeypatch.setattr(sys, "path", list(sys.path))  # main() makes the current directory importable, for this test
    assert main(["check", SPEC]) == 0
    assert capsys.readouterr().out == f"{SPEC}: tiny_ppo_cartpole: ok\n"
    assert main(["check", SPEC, "--set", "agent[0].algorithm.n_step=64"]) == 2
    assert capsys.readouterr().err == f'error: {SPEC}: agent[0].algorithm.n_step: unknown key; did you mean "n_steps"?\n'
    sys.modules.pop("tiny_ppo", None)


def resumed_trial(out: Path, args: tuple[str, ...]) -> dict:
    """Run the example until its first checkpoint, kill it, resume it from its directory; its trial.json."""
    kill_lab_at(Path(SPEC), out, "*/session_0/checkpoint.json", cwd=ALGORITHM, args=args, timeout=300)
    (trial,) = out.iterdir()
    done = lab("resume", str(trial), "-q")
    assert done.returncode == 0, done.stderr
    return json.loads((trial / "trial.json").read_text())


@pytest.mark.slow
@pytest.mark.long  # 20 s; resume after a kill is held in the default run by tests/test_resume.py
def test_a_user_algorithm_is_checkpointed_killed_and_resumed(tmp_path: Path) -> None:
    record = resumed_trial(tmp_path / "out", ("--set", "env[0].max_frame=3000", "--set", "meta.max_session=1",
                                              "--set", "meta.checkpoint_frequency=1000"))
    manifest = json.loads(next((tmp_path / "out").glob("*/session_0/checkpoint.json")).read_text())
    assert manifest["finished"] and len(manifest["resumes"]) == 1 and manifest["env_frames"][0] >= 3000
    assert record["pairs"][0]["agent"] == "tiny_ppo"


@pytest.mark.slow
@pytest.mark.long
def test_a_user_algorithm_learns_cartpole_through_a_kill_and_resume(tmp_path: Path) -> None:
    """The example spec as shipped (3 sessions, 200k frames each), killed at its first checkpoint and resumed: every
    session's final 100-episode mean return is at least 475."""
    record = resumed_trial(tmp_path / "out", ())
    print(f"TinyPPO, seeds {record['seeds']}: {record['pairs'][0]['per_session']} in {record['wall_time']} s")
    assert min(record["pairs"][0]["per_session"]) >= 475


LAB_ENV = ROOT / "examples" / "write_a_lab_env"


def test_the_lab_env_example_keeps_the_contract_and_learns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Corridors passes check_lab_env as docs/write-a-lab-env.md runs it, and its spec learns: the 64 bodies' PPO
    reaches its target_return of 0.9 (seed 1) well within the budget."""
    from slm_lab_like.envs.base import Clock
    from slm_lab_like.envs.checker import check_lab_env
    from slm_lab_like.experiment.session import Session
    from slm_lab_like.spec.load import load

    monkeypatch.syspath_prepend(str(LAB_ENV))
    monkeypatch.chdir(LAB_ENV)
    from corridor import Corridors

    check_lab_env(lambda: Corridors("corridor", 8, Clock(max_frame=10**9), length=6))
    result = Session(load("ppo_corridor.json"), seed=1).run()
    reached = result.first_reach(0, 0, 0.9)
    assert reached is not None and reached[0] < 20_000, reached
