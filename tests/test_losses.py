"""Losses, returns and schedules against hand computations."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from slm_lab_like.agents.losses import (bootstrap_truncated, double_dqn_target, dqn_target, gae, nstep_returns, ppo_clip_loss,
                           value_loss)
from slm_lab_like.agents.schedule import Schedule, value_at


def col(*xs: float) -> np.ndarray:
    """A (T, 1) float32 column: one body over T steps."""
    return np.array(xs, np.float32).reshape(-1, 1)


def test_gae_matches_hand_computation() -> None:
    # deltas: 1 + .9*.4 - .5 = .86, 1 + .9*.3 - .4 = .87, 1 + .9*.2 - .3 = .88; gamma*lam = .72
    adv, ret = gae(col(1, 1, 1), col(0.5, 0.4, 0.3), col(0, 0, 0).astype(bool), np.array([0.2], np.float32),
                   gamma=0.9, lam=0.8)
    a2 = 0.88
    a1 = 0.87 + 0.72 * a2
    a0 = 0.86 + 0.72 * a1
    np.testing.assert_allclose(adv[:, 0], [a0, a1, a2], rtol=1e-6)
    np.testing.assert_allclose(ret[:, 0], [a0 + 0.5, a1 + 0.4, a2 + 0.3], rtol=1e-6)


def test_gae_cuts_at_done() -> None:
    dones = np.array([[False], [True], [False]])
    adv, _ = gae(col(1, 1, 1), col(0.5, 0.4, 0.3), dones, np.array([0.2], np.float32), gamma=0.9, lam=0.8)
    # step 1 ended its episode: delta = 1 - .4 = .6, nothing flows back across it from step 2
    np.testing.assert_allclose(adv[:, 0], [0.86 + 0.72 * 0.6, 0.6, 0.88], rtol=1e-6)


def test_gae_bodies_are_independent() -> None:
    rewards = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    values = np.zeros((2, 2), np.float32)
    dones = np.zeros((2, 2), bool)
    adv, _ = gae(rewards, values, dones, np.zeros(2, np.float32), gamma=0.5, lam=1.0)
    np.testing.assert_allclose(adv, [[1.0, 0.5], [0.0, 1.0]])


def test_nstep_returns_hand_computed() -> None:
    ret = nstep_returns(col(1, 2, 3), np.zeros((3, 1), bool), np.array([10.0], np.float32), gamma=0.5)
    np.testing.assert_allclose(ret[:, 0], [4.0, 6.0, 8.0])  # 3+.5*10=8, 2+.5*8=6, 1+.5*6=4
    ret = nstep_returns(col(1, 2, 3), np.array([[False], [True], [False]]), np.array([10.0], np.float32), 0.5)
    np.testing.assert_allclose(ret[:, 0], [2.0, 2.0, 8.0])


def test_gae_with_lambda_one_is_nstep_advantage() -> None:
    rng = np.random.default_rng(0)
    r, v = rng.normal(size=(6, 3)).astype(np.float32), rng.normal(size=(6, 3)).astype(np.float32)
    d = rng.random((6, 3)) < 0.3
    last = rng.normal(size=3).astype(np.float32)
    adv, _ = gae(r, v, d, last, gamma=0.95, lam=1.0)
    np.testing.assert_allclose(adv, nstep_returns(r, d, last, 0.95) - v, rtol=1e-5, atol=1e-5)


def test_truncation_bootstraps_only_cut_episodes() -> None:
    rewards = np.ones(4, np.float32)
    terminated = np.array([False, True, False, True])
    truncated = np.array([False, False, True, True])
    out = bootstrap_truncated(rewards, terminated, truncated, np.full(4, 5.0, np.float32), gamma=0.9)
    np.testing.assert_allclose(out, [1.0, 1.0, 5.5, 1.0])


def test_ppo_clip_loss_hand_computed() -> None:
    ratio = torch.tensor([1.5, 0.5, 1.0, 1.5])
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0])
    old = torch.zeros(4)
    logp = torch.log(ratio).requires_grad_(True)
    loss = ppo_clip_loss(logp, old, adv, clip=0.2)
    # min(1.5, 1.2)=1.2; min(.5, .8)=.5; -1; min(-1.5, -1.2)=-1.5  -> mean -0.2, loss 0.2
    assert loss.item() == pytest.approx(0.2, abs=1e-6)
    loss.backward()
    # the clipped sample (ratio 1.5, A>0) gets no gradient; the others get -A*ratio/4
    np.testing.assert_allclose(logp.grad.numpy(), [0.0, -0.125, 0.25, 0.375], atol=1e-6)


def test_value_loss_clipping_is_pessimistic() -> None:
    v, old, ret = torch.tensor([2.0]), torch.tensor([1.0]), torch.tensor([3.0])
    assert value_loss(v, old, ret, None).item() == pytest.approx(1.0)
    assert value_loss(v, old, ret, 0.5).item() == pytest.approx(2.25)  # clipped value 1.5 is further off


def test_dqn_and_double_dqn_targets() -> None:
    next_q_target = torch.tensor([[1.0, 3.0], [2.0, 4.0]])
    rewards, term = torch.tensor([1.0, 1.0]), torch.tensor([0.0, 1.0])
    np.testing.assert_allclose(dqn_target(next_q_target, rewards, term, 0.9).numpy(), [3.7, 1.0], rtol=1e-6)
    next_q_online = torch.tensor([[5.0, 0.0], [0.0, 5.0]])
    zeros = torch.zeros(2)
    # online picks action 0 in row 0 (target value 1, not the max 3) and action 1 in row 1 (4)
    np.testing.assert_allclose(double_dqn_target(next_q_online, next_q_target, zeros, zeros, 1.0).numpy(), [1.0, 4.0])
    np.testing.assert_allclose(dqn_target(next_q_target, zeros, zeros, 1.0).numpy(), [3.0, 4.0])


def test_schedules() -> None:
    lin = Schedule("linear", start=1.0, end=0.0, frames=100)
    assert [lin(0), lin(50), lin(100), lin(1000)] == [1.0, 0.5, 0.0, 0.0]
    delayed = Schedule("linear", start=1.0, end=0.0, frames=100, start_frame=100)
    assert delayed(50) == 1.0 and delayed(150) == 0.5
    exp = Schedule("exponential", start=1.0, end=0.01, frames=100)
    assert exp(50) == pytest.approx(0.1)
    cos = Schedule("cosine", start=1.0, end=0.0, frames=100)
    assert cos(50) == pytest.approx(0.5) and cos(100) == pytest.approx(0.0, abs=1e-12)
    assert value_at(0.3, 10**6) == 0.3 and value_at(lin, 25) == 0.75
    with pytest.raises(ValueError):
        Schedule("exponential", start=0.0, end=1.0)(5)
    assert math.isclose(Schedule("constant", start=0.7)(123), 0.7)
