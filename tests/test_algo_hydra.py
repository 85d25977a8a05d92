"""Multi-task agents: one agent, groups in envs of different spaces, a Hydra net, groups finishing at different times."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from slm_lab_like.agents.base import AgentContext, ComponentSpec, Transition
from slm_lab_like.agents.memory import OnPolicyBatchConfig
from slm_lab_like.agents.net import HydraConfig, MLPConfig
from slm_lab_like.agents.ppo import PPO, PPOConfig
from tests.helpers import make_group, train

HYDRA = {"name": "Hydra", "in_layers": [32], "hid_layers": [32], "optim": {"name": "Adam", "lr": 0.001}}


@pytest.mark.parametrize("algorithm, memory", [
    ({"name": "PPO", "n_epochs": 2, "minibatch_size": 64}, {"name": "OnPolicyBatch", "n_steps": 16}),
    ({"name": "A2C"}, {"name": "OnPolicyBatch", "n_steps": 8}),
    ({"name": "REINFORCE"}, {"name": "OnPolicyBatch", "n_steps": 32}),
    ({"name": "DQN", "learning_starts": 100, "train_freq": 16}, {"name": "Replay", "batch_size": 32}),
])
def test_multitask_cartpole_and_acrobot(algorithm: dict[str, Any], memory: dict[str, Any]) -> None:
    agent = {"name": "multi", "algorithm": algorithm, "memory": memory, "net": HYDRA}
    raw = {"agent": [agent], "env": [{"name": "CartPole-v1", "max_frame": 2000}, {"name": "Acrobot-v1", "max_frame": 1200}],
           "body": {"num": 4}, "meta": {"log_frequency": 10**9}}
    space, result = train(raw)
    (algo,) = space.agent_space.agents
    assert algo.opt_step > 0 and np.isfinite(algo.last_loss)
    assert 2000 <= result.env_frames[0] < 2004 and result.env_frames[1] == 1200  # each env keeps its own budget
    assert any(c[1] == 0 and m.rows for c, m in result.metrics.items())  # CartPole episodes ended and were counted
    net = algo.q_net if algorithm["name"] == "DQN" else algo.policy.actor
    assert len(net.in_heads) == 2  # one input head per signature, trunk shared


def test_mlp_with_two_signatures_asks_for_hydra() -> None:
    groups = [make_group("CartPole-v1", 2, 0), make_group("Acrobot-v1", 2, 1)]
    ctx = AgentContext(groups, seed=0, net=ComponentSpec("MLP", MLPConfig()))
    with pytest.raises(ValueError, match="Hydra"):
        PPO(PPOConfig(), ctx)


def test_same_signature_groups_share_one_mlp() -> None:
    groups = [make_group("CartPole-v1", 2, 0), make_group("CartPole-v1", 3, 1)]
    ppo = PPO(PPOConfig(), AgentContext(groups, seed=0))
    assert ppo.sig_of == [0, 0]
    assert ppo.memories[1].obs.shape[1] == 3


def test_finished_group_stops_blocking_training() -> None:
    groups = [make_group("CartPole-v1", 2, 0), make_group("Acrobot-v1", 2, 1)]
    ctx = AgentContext(groups, seed=0, memory=ComponentSpec("OnPolicyBatch", OnPolicyBatchConfig(n_steps=4)),
                       net=ComponentSpec("Hydra", HydraConfig(in_layers=[8], hid_layers=[8])))
    ppo = PPO(PPOConfig(n_epochs=1, minibatch_size=8), ctx)

    def step(g: int, dim: int) -> None:
        obs = np.zeros((2, dim), np.float32)
        ppo.update(g, Transition(obs, ppo.act(g, obs), np.ones(2), obs, np.zeros(2, bool), np.zeros(2, bool), obs))

    for _ in range(4):
        step(0, 4)
    step(1, 6)
    assert ppo.opt_step == 0  # CartPole's rollout is full but Acrobot's is not: wait
    ppo.group_finished(1)
    assert ppo.opt_step == 1  # Acrobot is done: train on CartPole's rollout now
    for _ in range(4):
        step(0, 4)
    assert ppo.opt_step == 2


def test_gpu_flag_without_cuda_is_a_clear_error() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    ctx = AgentContext([make_group("CartPole-v1", 1)], seed=0, net=ComponentSpec("MLP", MLPConfig(gpu=True)))
    with pytest.raises(ValueError, match="net.gpu"):
        PPO(PPOConfig(), ctx)
