"""Every observation space kind meets every algorithm whose action space fits, through a real session."""
from __future__ import annotations

import pytest

from slm_lab_like.agents.compat import agent_problem
from slm_lab_like.agents.base import ComponentSpec
from slm_lab_like.agents.registry import ALGORITHMS
from slm_lab_like.envs.spaces import observation_converter
from tests.helpers import train
from tests.space_envs import ACT_KINDS, OBS_KINDS, act_space, obs_space

LEARNERS = ("Random", "REINFORCE", "A2C", "PPO", "DQN", "DoubleDQN", "SAC")


def fits(algorithm: str, obs: str, act: str) -> bool:
    """Whether the lab's compatibility check lets the algorithm act in this pair of spaces."""
    config = ALGORITHMS.get(algorithm).Config()
    seen, _ = observation_converter(obs_space(obs), "test")
    return agent_problem(ComponentSpec(algorithm, config), None, None, [(seen, act_space(act))]) is None


@pytest.mark.parametrize("algorithm", LEARNERS)
@pytest.mark.parametrize("obs", OBS_KINDS)
def test_each_observation_space_with_each_fitting_algorithm(obs: str, algorithm: str) -> None:
    acts = [a for a in ACT_KINDS if fits(algorithm, obs, a)]
    assert acts, f"{algorithm} fits no action space with {obs} observations"
    for act in acts:
        extra = {"learning_starts": 16} if algorithm.endswith("DQN") or algorithm == "SAC" else {}
        memory = {"name": "OnPolicyBatch", "n_steps": 16} if algorithm in ("A2C", "PPO") else None
        agent = {"algorithm": {"name": algorithm, **extra}, **({"memory": memory} if memory else {})}
        raw = {"agent": [agent], "env": [{"name": "tests.space_envs:SpaceEnv", "kwargs": {"obs": obs, "act": act},
                                          "max_frame": 120}],
               "body": {"num": 2}, "meta": {"random_seed": 0}}
        space, result = train(raw)
        assert result.env_frames == [120]
        assert sum(len(m.rows) for m in result.metrics.values()) == 12  # episodes of 10 steps, 2 bodies
        assert space.agent_space.agents[0].frame == 120
