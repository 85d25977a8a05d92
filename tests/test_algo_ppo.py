"""PPO: acting, rollouts and truncation bootstrapping, training steps, eval mode, checkpoints, learning checks."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from slm_lab_like.agents.base import AgentContext, ComponentSpec, Transition
from slm_lab_like.agents.checkpoint import load_agent, save_agent
from slm_lab_like.agents.memory import OnPolicyBatchConfig
from slm_lab_like.agents.net import MLPConfig
from slm_lab_like.agents.ppo import PPO, PPOConfig
from slm_lab_like.analysis.metrics import pair_returns
from tests.helpers import make_group, train


def make_ppo(env_id: str = "CartPole-v1", num: int = 4, n_steps: int = 8, **cfg: Any) -> PPO:
    ctx = AgentContext([make_group(env_id, num)], seed=0,
                       memory=ComponentSpec("OnPolicyBatch", OnPolicyBatchConfig(n_steps=n_steps)),
                       net=ComponentSpec("MLP", MLPConfig(hid_layers=[16])))
    return PPO(PPOConfig(n_epochs=2, minibatch_size=8, **cfg), ctx)


def step(algo: PPO, obs: np.ndarray, term: np.ndarray | None = None, trunc: np.ndarray | None = None,
         final: np.ndarray | None = None) -> np.ndarray:
    n = len(obs)
    action = algo.act(0, obs)
    term = np.zeros(n, bool) if term is None else term
    trunc = np.zeros(n, bool) if trunc is None else trunc
    next_obs = obs + 0.01
    algo.update(0, Transition(obs, action, np.ones(n), next_obs, term, trunc,
                              next_obs if final is None else final))
    return action


def test_act_shapes_and_dtypes_discrete_and_box() -> None:
    ppo = make_ppo()
    a = ppo.act(0, np.zeros((4, 4), np.float32))
    assert a.shape == (4,) and a.dtype.kind == "i" and set(a.tolist()) <= {0, 1}
    ppo_box = make_ppo("Pendulum-v1", num=3)
    a = ppo_box.act(0, np.zeros((3, 3), np.float32))
    assert a.shape == (3, 1) and a.dtype == np.float32
    assert np.all(np.abs(a) <= 2.0)  # clipped to the Box bounds


def test_rollout_trains_after_n_steps_and_records_loss() -> None:
    ppo = make_ppo(n_steps=8)
    obs = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32)
    before = [p.detach().clone() for p in ppo.policy.parameters()]
    for _ in range(7):
        step(ppo, obs)
    assert ppo.opt_step == 0 and ppo.memories[0].pos == 7
    step(ppo, obs)
    # 32 samples / minibatch 8 = 4 minibatches x 2 epochs
    assert ppo.opt_step == 8 and ppo.memories[0].pos == 0 and ppo.frame == 32
    assert np.isfinite(ppo.last_loss)
    assert any(not torch.equal(b, p) for b, p in zip(before, ppo.policy.parameters()))


def test_a_rollout_not_a_multiple_of_the_minibatch_size_is_split_into_minibatches_no_larger() -> None:
    ppo = make_ppo(num=3, n_steps=10)  # 30 rows, minibatches of at most 8
    obs = np.zeros((3, 4), np.float32)
    for _ in range(10):
        step(ppo, obs)
    assert ppo.opt_step == 2 * 4  # ceil(30 / 8) = 4 minibatches of 7 or 8 rows, 2 epochs


def test_truncated_steps_bootstrap_and_terminated_do_not() -> None:
    ppo = make_ppo(num=3, gamma=0.5)
    obs = np.zeros((3, 4), np.float32)
    final = np.full((3, 4), 0.3, np.float32)
    step(ppo, obs, term=np.array([False, True, False]), trunc=np.array([False, False, True]), final=final)
    with torch.no_grad():
        v_final = ppo.policy.value(torch.from_numpy(final), 0).numpy()
    rewards = ppo.memories[0].rewards[0]
    np.testing.assert_allclose(rewards, [1.0, 1.0, 1.0 + 0.5 * v_final[2]], rtol=1e-6)
    np.testing.assert_array_equal(ppo.memories[0].dones[0], [False, True, True])


def test_eval_mode_is_greedy_and_frozen() -> None:
    ppo = make_ppo()
    ppo.set_training(False)
    obs = np.random.default_rng(1).normal(size=(4, 4)).astype(np.float32)
    first = ppo.act(0, obs)
    for _ in range(20):
        np.testing.assert_array_equal(step(ppo, obs), first)
    assert ppo.opt_step == 0 and ppo.memories[0].pos == 0


def test_checkpoint_round_trip(tmp_path: Any) -> None:
    ppo = make_ppo(normalize_obs=True, normalize_reward=True)
    obs = np.random.default_rng(2).normal(size=(4, 4)).astype(np.float32)
    for _ in range(16):
        step(ppo, obs)
    path = tmp_path / "ppo.pt"
    save_agent(ppo, path)
    other = make_ppo(normalize_obs=True, normalize_reward=True)
    load_agent(other, path)
    assert other.frame == ppo.frame and other.opt_step == ppo.opt_step
    for a, b in zip(ppo.policy.parameters(), other.policy.parameters()):
        assert torch.equal(a, b)
    np.testing.assert_array_equal(other.obs_norms[0].rms.mean, ppo.obs_norms[0].rms.mean)
    assert other.optim.state_dict()["state"].keys() == ppo.optim.state_dict()["state"].keys()
    ppo.set_training(False)
    other.set_training(False)
    np.testing.assert_array_equal(ppo.act(0, obs), other.act(0, obs))


def test_schedules_follow_frames() -> None:
    from slm_lab_like.agents.schedule import Schedule
    ppo = make_ppo(clip_eps=Schedule("linear", start=0.2, end=0.0, frames=64))
    ppo.net_cfg.optim.lr = Schedule("linear", start=1e-3, end=0.0, frames=64)
    obs = np.zeros((4, 4), np.float32)
    for _ in range(8):
        step(ppo, obs)
    assert ppo.optim.opt.param_groups[0]["lr"] == pytest.approx(1e-3 * (1 - 32 / 64))


@pytest.mark.long  # 8-30 s of the default run (5 min on 2 cores)
def test_short_cartpole_run_improves_returns() -> None:
    agent = {"name": "ppo", "algorithm": {"name": "PPO", "gamma": 0.98, "lam": 0.8, "n_epochs": 20,
                                          "minibatch_size": 256},
             "memory": {"name": "OnPolicyBatch", "n_steps": 32},
             "net": {"name": "MLP", "hid_layers": [64, 64], "optim": {"name": "Adam", "lr": 0.001}}}
    raw = {"agent": [agent], "env": [{"name": "CartPole-v1", "max_frame": 20000}], "body": {"num": 8},
           "meta": {"log_frequency": 10**9}}
    _, result = train(raw)
    returns = [ret for _, ret, _, _ in pair_returns(result.metrics, 0, 0)]
    assert np.mean(returns[-20:]) > 2 * np.mean(returns[:20])


