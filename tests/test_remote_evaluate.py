"""Hosted evaluation: submitted agents run in their own subprocess; the JSON report is judge-side data."""

from __future__ import annotations

import json

import pytest

from slm_lab_like.remote.evaluate import evaluate

pytestmark = pytest.mark.timeout(120)

GOOD = """
def policy(obs):
    return 1 if obs[2] + 0.5 * obs[3] > 0 else 0
"""

SLOW_THEN_CRASH = """
import time
calls = 0
def policy(obs):
    global calls
    calls += 1
    if calls == 30:
        time.sleep(60)
    return 0
"""

INVALID = """
def policy(obs):
    return 5
"""


def write_agent(tmp_path, source: str):
    path = tmp_path / "agent.py"
    path.write_text(source)
    return str(path)


def test_evaluate_good_agent_writes_json_report(tmp_path):
    """A balancing policy scores 500 on every judge-seeded episode and the report is plain JSON."""
    out = tmp_path / "report.json"
    report = evaluate(write_agent(tmp_path, GOOD), "CartPole-v1", episodes=3, episode_time_limit=20,
                      seed=100, report_path=str(out))
    on_disk = json.loads(out.read_text())
    assert on_disk == report
    assert [r["seed"] for r in report["results"]] == [100, 101, 102]
    assert report["mean_return"] == 500.0 and report["std_return"] == 0.0 and report["n_errors"] == 0
    assert all(r["length"] == 500 and r["truncated"] for r in report["results"])


def test_evaluate_time_limit_and_invalid_actions_are_errors(tmp_path):
    """An episode that overruns its wall-clock limit and invalid actions become per-episode errors."""
    slow = evaluate(write_agent(tmp_path, SLOW_THEN_CRASH), "CartPole-v1", episodes=3, episode_time_limit=2)
    assert slow["n_errors"] >= 1 and any("wall-clock" in e for e in slow["errors"])
    assert slow["n_completed"] + slow["n_errors"] == 3 and len(slow["results"]) == 3
    first_error = next(r for r in slow["results"] if r["error"])
    assert first_error["return"] is None
    bad = evaluate(write_agent(tmp_path, INVALID), "CartPole-v1", episodes=2, episode_time_limit=10)
    assert bad["n_completed"] == 0 and bad["mean_return"] is None
    assert all("invalid_action" in r["error"] for r in bad["results"])


def test_a_crashing_submission_is_one_line_with_its_stderr_kept(tmp_path):
    """The report's error is the exception the submission died of, in one line; its stderr's tail is kept beside."""
    crash = "def policy(obs):\n    raise ValueError('my policy lost its weights')\n"
    report = evaluate(write_agent(tmp_path, crash), "CartPole-v1", episodes=1, episode_time_limit=10)
    (result,) = report["results"]
    assert result["error"] == "agent process exited with code 1: ValueError: my policy lost its weights"
    assert "Traceback" in result["agent_stderr"] and "raise ValueError" in result["agent_stderr"]
    assert report["errors"] == [f"episode 0: {result['error']}"]
