"""REINFORCE: returns to go with each baseline, critic-free operation, learning check."""
from __future__ import annotations


import numpy as np
import pytest

from slm_lab_like.agents.base import AgentContext, ComponentSpec, Transition
from slm_lab_like.agents.losses import nstep_returns
from slm_lab_like.agents.memory import OnPolicyBatchConfig
from slm_lab_like.agents.net import MLPConfig
from slm_lab_like.agents.reinforce import REINFORCE, REINFORCEConfig
from tests.helpers import make_group


def make_reinforce(baseline: str, n_steps: int = 4, through_truncation: bool = False) -> REINFORCE:
    ctx = AgentContext([make_group("CartPole-v1", 2)], seed=0,
                       memory=ComponentSpec("OnPolicyBatch", OnPolicyBatchConfig(n_steps=n_steps)),
                       net=ComponentSpec("MLP", MLPConfig(hid_layers=[16])))
    return REINFORCE(REINFORCEConfig(baseline=baseline, through_truncation=through_truncation), ctx)


def fill(algo: REINFORCE, steps: int) -> None:
    rng = np.random.default_rng(0)
    for t in range(steps):
        obs = rng.normal(size=(2, 4)).astype(np.float32)
        action = algo.act(0, obs)
        algo.update(0, Transition(obs, action, np.ones(2), obs, np.array([t == 1, False]),
                                  np.array([False, t == 2]), obs))


@pytest.mark.parametrize("baseline", ["critic", "mean", "none"])
def test_returns_and_baselines(baseline: str) -> None:
    algo = make_reinforce(baseline)
    assert algo.policy.has_critic == (baseline == "critic")
    fill(algo, 3)
    mem = algo.memories[0]
    zeros = np.zeros(2, np.float32)
    adv, ret = algo.advantages(mem, zeros)
    expected = nstep_returns(mem.rewards, mem.dones, zeros, 0.99)
    np.testing.assert_allclose(ret, expected, rtol=1e-6)
    if baseline == "critic":
        np.testing.assert_allclose(adv, expected - mem.values, rtol=1e-6)
    elif baseline == "mean":
        np.testing.assert_allclose(adv, expected - expected.mean(), rtol=1e-6)
    else:
        np.testing.assert_allclose(adv, expected)
    if baseline != "critic":
        # without a critic, a time-limit cut cannot be bootstrapped: the reward stays as observed
        assert mem.rewards[2, 1] == 1.0


def test_a_return_runs_through_a_truncation_only_when_asked() -> None:
    """Body 1 is truncated at step 2 and body 0 terminated at step 1: through_truncation ends only body 0's."""
    cut, through = make_reinforce("none"), make_reinforce("none", through_truncation=True)
    for algo in (cut, through):
        fill(algo, 4)
    assert cut.memories[0].dones[:, 1].tolist() == [False, False, True, False]
    assert through.memories[0].dones[:, 1].tolist() == [False, False, False, False]
    assert through.memories[0].dones[:, 0].tolist() == [False, True, False, False]
    _, ret = through.advantages(through.memories[0], np.zeros(2, np.float32))
    np.testing.assert_allclose(ret[0, 1], sum(0.99**k for k in range(4)), rtol=1e-6)
    assert REINFORCE.config_problem(REINFORCEConfig(through_truncation=True))[0] == "through_truncation"


@pytest.mark.parametrize("baseline", ["critic", "none"])
def test_trains_once_per_rollout(baseline: str) -> None:
    algo = make_reinforce(baseline)
    fill(algo, 8)
    assert algo.opt_step == 2 and np.isfinite(algo.last_loss)



def test_mean_baseline_counts_only_rows_where_a_body_acted() -> None:
    algo = make_reinforce("mean")
    mem = algo.memories[0]
    mem.add_extras(turns=True, mask_width=None)
    rng = np.random.default_rng(1)
    for t in range(3):
        obs = rng.normal(size=(2, 4)).astype(np.float32)
        mem.add(obs, np.zeros(2, np.int64), np.array([1.0, 5.0]), np.zeros(2, bool), np.zeros(2), np.zeros(2),
                obs, valid=np.array([True, t == 0]))
    zeros = np.zeros(2, np.float32)
    adv, ret = algo.advantages(mem, zeros)
    acted = ret[mem.valid]
    assert len(acted) == 4
    np.testing.assert_allclose(adv, ret - acted.mean(), rtol=1e-6)
    assert not np.allclose(acted.mean(), ret.mean())  # the waiting rows would have moved the baseline
