"""Every benchmark spec builds its agent: names registered, every key a Config field of the right kind."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from agents.base import Transition
from tests.algo_driver import SPEC_DIR, build_algo, make_group

SPECS = sorted(SPEC_DIR.glob("*.json"))


def test_benchmark_specs_exist() -> None:
    names = {p.stem for p in SPECS}
    assert {"ppo_cartpole", "dqn_cartpole", "a2c_cartpole", "reinforce_cartpole", "ppo_acrobot",
            "ppo_pendulum"} <= names


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_spec_builds_and_steps(path: Path) -> None:
    spec = json.loads(path.read_text())
    env = spec["env"][0]
    group = make_group(env["name"], spec["body"]["num"])
    algo = build_algo(spec["agent"][0], [group], seed=0)
    assert dataclasses.is_dataclass(algo.config)
    n = group.num_bodies
    obs = np.stack([group.observation_space.sample() for _ in range(n)])
    action = algo.act(0, obs)
    assert action.shape[0] == n
    algo.update(0, Transition(obs, action, np.zeros(n), obs, np.zeros(n, bool), np.zeros(n, bool), obs))
    assert algo.frame == n
