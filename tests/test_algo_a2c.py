"""A2C: n-step and GAE advantages, one step per rollout, Box actions, learning check."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from slm_lab_like.agents.a2c import A2C, A2CConfig
from slm_lab_like.agents.base import AgentContext, ComponentSpec, Transition
from slm_lab_like.agents.losses import gae, nstep_returns
from slm_lab_like.agents.memory import OnPolicyBatchConfig
from slm_lab_like.agents.net import MLPConfig
from tests.helpers import make_group


def make_a2c(env_id: str = "CartPole-v1", num: int = 2, n_steps: int = 4, **cfg: Any) -> A2C:
    ctx = AgentContext([make_group(env_id, num)], seed=0,
                       memory=ComponentSpec("OnPolicyBatch", OnPolicyBatchConfig(n_steps=n_steps)),
                       net=ComponentSpec("MLP", MLPConfig(hid_layers=[16])))
    return A2C(A2CConfig(**cfg), ctx)


def fill(algo: A2C, steps: int, obs_dim: int) -> None:
    rng = np.random.default_rng(0)
    n = algo.groups[0].num_bodies
    for t in range(steps):
        obs = rng.normal(size=(n, obs_dim)).astype(np.float32)
        action = algo.act(0, obs)
        term = np.array([t == 1] + [False] * (n - 1))
        algo.update(0, Transition(obs, action, rng.normal(size=n), obs, term, np.zeros(n, bool), obs))


@pytest.mark.parametrize("advantage", ["nstep", "gae"])
def test_advantages_match_the_loss_functions(advantage: str) -> None:
    a2c = make_a2c(advantage=advantage, lam=0.9)
    fill(a2c, 3, 4)
    mem = a2c.memories[0]
    last = np.array([0.5, -0.5], np.float32)
    adv, ret = a2c.advantages(mem, last)
    if advantage == "gae":
        exp_adv, exp_ret = gae(mem.rewards, mem.values, mem.dones, last, 0.99, 0.9)
    else:
        exp_ret = nstep_returns(mem.rewards, mem.dones, last, 0.99)
        exp_adv = exp_ret - mem.values
    np.testing.assert_allclose(adv, exp_adv, rtol=1e-6)
    np.testing.assert_allclose(ret, exp_ret, rtol=1e-6)


def test_one_optimiser_step_per_rollout() -> None:
    a2c = make_a2c(n_steps=4)
    fill(a2c, 12, 4)
    assert a2c.opt_step == 3 and np.isfinite(a2c.last_loss)


def test_box_actions() -> None:
    a2c = make_a2c("Pendulum-v1", num=3, n_steps=2)
    fill(a2c, 4, 3)
    assert a2c.opt_step == 2
    a2c.set_training(False)
    obs = np.zeros((3, 3), np.float32)
    np.testing.assert_array_equal(a2c.act(0, obs), a2c.act(0, obs))

