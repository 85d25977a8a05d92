"""A super body (one body over several env players) under learning algorithms, through the lab session."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from tests.helpers import train  # noqa: E402

SMALL_NET = {"name": "MLP", "hid_layers": [32], "optim": {"name": "Adam", "lr": 0.001}}


@pytest.mark.parametrize("algorithm, memory", [
    ({"name": "PPO", "n_epochs": 2, "minibatch_size": 64}, {"name": "OnPolicyBatch", "n_steps": 32}),
    ({"name": "DQN", "learning_starts": 64, "train_freq": 8}, {"name": "Replay", "batch_size": 32}),
])
def test_learner_drives_both_runners_as_one_joint_body(algorithm: dict, memory: dict) -> None:
    raw = {"agent": [{"name": "team", "algorithm": algorithm, "memory": memory, "net": SMALL_NET},
                     {"name": "chaser", "algorithm": {"name": "Random"}}],
           "env": [{"name": "tag_arena", "max_frame": 1500, "kwargs": {"size": 5, "max_cycles": 20, "entities": [
                        {"type": "runner"}, {"type": "runner"}, {"type": "chaser"}]},
                    "by_agent": {"team": {"player": ["runner_0", "runner_1"], "super_action": "joint",
                                          "null_obs": -1.0},
                                 "chaser": {"player": "chaser_0"}}}],
           "body": {"product": "outer", "num": 1},
           "meta": {"random_seed": 0, "log_frequency": 10**9}}
    space, result = train(raw)
    team = space.agent_space.agents[0]
    env = space.env_space.envs[0]
    block = env.blocks[0]
    assert block.action_space.n == 25  # one Discrete over both runners' 5 moves
    assert team.opt_step > 0 and np.isfinite(team.last_loss)
    rows = result.metrics[(0, 0, 0)].rows
    assert rows and all(r["t"] <= 20 for r in rows)  # episodes end at max_cycles or when both are caught
    assert len(rows) == len(result.metrics[(1, 0, 0)].rows)  # the team body and the chaser share each episode
