"""Every benchmark spec builds its agent: names registered, every key a Config field of the right kind."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from slm_lab_like.spec.load import load, with_mode
from tests.helpers import train

SPEC_DIR = Path(__file__).resolve().parent.parent / "spec" / "benchmark"

SPECS = sorted(SPEC_DIR.glob("*.json"))


def test_benchmark_specs_exist() -> None:
    names = {p.stem for p in SPECS}
    assert {"ppo_cartpole", "dqn_cartpole", "a2c_cartpole", "reinforce_cartpole", "ppo_acrobot",
            "ppo_pendulum"} <= names


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_spec_builds_and_trains(path: Path) -> None:
    spec = with_mode(load(path), "test")
    space, result = train(spec)
    (algo,) = space.agent_space.agents
    assert dataclasses.is_dataclass(algo.config)
    assert type(algo).__name__ == spec.agent[0].algorithm.name
    assert algo.frame == result.env_frames[0]  # the agent saw every frame the env stepped
