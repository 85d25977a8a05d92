"""The judge compliance kit: the lab's single-agent judge passes every check (Discrete and Box actions), and five
judges broken in one way each fail exactly the check named for their fault; the command prints and exits 1."""
from __future__ import annotations

import pytest

from slm_lab_like.remote import JudgeServer
from slm_lab_like.remote.compliance import CHECKS, check_judge, main
from tests.broken_judges import BROKEN

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
def test_the_labs_judge_passes_every_check(env: str) -> None:
    judge = JudgeServer(env)
    address = judge.start()
    try:
        results = check_judge(address, timeout=3.0)
    finally:
        judge.stop()
    assert [r.name for r in results] == list(CHECKS)
    assert [r for r in results if not r.passed] == []


@pytest.mark.parametrize("fault", sorted(BROKEN))
def test_a_broken_judge_fails_the_check_named_for_its_fault(fault: str) -> None:
    judge = BROKEN[fault]("CartPole-v1")
    address = judge.start()
    try:
        results = check_judge(address, timeout=3.0)
    finally:
        judge.stop()
    failed = {r.name: r.detail for r in results if not r.passed}
    assert list(failed) == [fault], failed


def test_the_command_prints_each_check_and_exits_1_on_a_failure(capsys: pytest.CaptureFixture) -> None:
    for cls, code in ((JudgeServer, 0), (BROKEN["close"], 1)):
        judge = cls("CartPole-v1")
        address = judge.start()
        try:
            assert main([address, "--timeout", "3"]) == code
        finally:
            judge.stop()
        out = capsys.readouterr().out
        assert out.count("\n") == len(CHECKS) + 1 and ("FAIL  close" in out) == (code == 1)
