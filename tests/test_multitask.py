"""Multi-task: one agent, bodies in CartPole-v1 and Acrobot-v1 through the Hydra net, each env on its own budget."""
from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.load import load
from tests.helpers import train

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec" / "multitask_cartpole_acrobot.json"


def test_each_env_keeps_its_own_budget_and_the_agent_trains_on_after_one_ends() -> None:
    raw = copy.deepcopy(json.loads(SPEC.read_text()))
    raw["env"][0]["max_frame"] = 1024
    raw["env"][1]["max_frame"] = 4096
    raw["agent"][0]["memory"]["n_steps"] = 32
    raw["agent"][0]["algorithm"]["n_epochs"] = 1
    space, result = train(raw)
    assert 1024 <= result.env_frames[0] < 1024 + 8 and result.env_frames[1] == 4096  # within one step of each budget
    groups = [m for c, m in result.metrics.items() if c[1] == 1]
    assert groups and all(r["env_frame"] <= 4096 for m in groups for r in m.rows)
    cartpole_steps = max(r["opt_step"] for c, m in result.metrics.items() if c[1] == 0 for r in m.rows)
    assert space.agent_space.agents[0].opt_step > cartpole_steps + 10  # learning goes on alone in Acrobot


@pytest.mark.slow
@pytest.mark.long
def test_multitask_spec_solves_both_envs_in_one_session() -> None:
    spec = load(SPEC)
    start = time.perf_counter()
    result = Session(spec, seed=spec.meta.random_seed or 0).run()
    wall = time.perf_counter() - start
    cartpole, acrobot = result.pair_mean_return(0, 0), result.pair_mean_return(0, 1)
    print(f"\nmulti-task PPO+Hydra: CartPole-v1 {cartpole:.1f} over the last 100 episodes after {result.env_frames[0]} "
          f"frames, Acrobot-v1 {acrobot:.1f} after {result.env_frames[1]} frames; {wall:.0f} s wall-clock")
    assert cartpole >= 475 and acrobot >= -100
