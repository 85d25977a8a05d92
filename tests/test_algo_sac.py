"""SAC: its targets and losses on hand-worked cases, the tanh log-prob correction, Box scaling, storage with true
next obs, training cadence, checkpoints that resume bit for bit, and sessions (Box, Discrete, Hydra, every
observation kind)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Independent, Normal, TanhTransform, TransformedDistribution

import slm_lab_like.agents  # noqa: F401  (registers every algorithm, memory and net)
from slm_lab_like.agents.base import AgentContext, BodyGroup, ComponentSpec, Transition
from slm_lab_like.agents.checkpoint import load_agent, load_memory, save_agent, save_memory
from slm_lab_like.agents.compat import agent_problem
from slm_lab_like.agents.memory import PrioritizedReplayConfig, ReplayBatch, ReplayConfig
from slm_lab_like.agents.net import HydraConfig, MLPConfig
from slm_lab_like.agents.net.base import SplitOptim
from slm_lab_like.agents.sac import (SAC, SACConfig, actor_loss, alpha_loss, discrete_actor_loss, discrete_alpha_loss,
                        discrete_soft_q_target, soft_q_target, squashed_gaussian)
from tests.helpers import make_group, train
from tests.space_envs import ACT_KINDS, OBS_KINDS

ROOT = Path(__file__).resolve().parent.parent
NET = MLPConfig(hid_layers=[16], activation="relu", clip_grad_norm=None)


def make_sac(env_id: str = "Pendulum-v1", num: int = 2, memory: ComponentSpec | None = None, seed: int = 0,
             **cfg: Any) -> SAC:
    ctx = AgentContext([make_group(env_id, num)], seed=seed,
                       memory=memory or ComponentSpec("Replay", ReplayConfig(capacity=1000, batch_size=8)),
                       net=ComponentSpec("MLP", NET))
    return SAC(SACConfig(**cfg), ctx)


def feed(sac: SAC, steps: int, seed: int = 0, end_every: int = 0) -> None:
    """Act and update `steps` times on random observations (episode ends every `end_every` steps, alternating
    termination and truncation)."""
    rng = np.random.default_rng(seed)
    n, dim = sac.groups[0].num_bodies, sac.groups[0].observation_space.shape[0]
    for t in range(steps):
        obs = rng.normal(size=(n, dim)).astype(np.float32)
        action = sac.act(0, obs)
        end = np.zeros(n, bool)
        if end_every and t % end_every == end_every - 1:
            end[t % n] = True
        term, trunc = end & (t % 2 == 0), end & (t % 2 == 1)
        next_obs = rng.normal(size=(n, dim)).astype(np.float32)
        sac.update(0, Transition(obs, action, rng.normal(size=n), next_obs, term, trunc, next_obs + 5.0))


def constant(net: torch.nn.Module, head_biases: list[list[float]]) -> None:
    """Make a one-signature MLP output constants: zero weights and biases, then each head's bias as given."""
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        for head, bias in zip(net.out.heads, head_biases):
            head.bias.copy_(torch.tensor(bias))


# ---- pure functions on hand-worked cases ----------------------------------------------------------------------


def test_soft_q_target_by_hand() -> None:
    """y = r + gamma (1 - terminated) (min(Q1', Q2') - alpha logpi'): 1 + 0.5 (min(3, 4) + 0.2) = 2.6; a terminated
    row keeps its reward only."""
    y = soft_q_target(torch.tensor([1.0, 2.0]), torch.tensor([0.0, 1.0]), 0.5, torch.tensor([3.0, 5.0]),
                      torch.tensor([4.0, 1.0]), torch.tensor([-1.0, 2.0]), 0.2)
    torch.testing.assert_close(y, torch.tensor([2.6, 2.0]))
    per_row = soft_q_target(torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([0.25]), torch.tensor([3.0]),
                            torch.tensor([4.0]), torch.tensor([-1.0]), 0.2)
    torch.testing.assert_close(per_row, torch.tensor([1.8]))  # n-step rows: their own discount


def test_discrete_soft_q_target_by_hand() -> None:
    """pi(.|s') = (1/4, 3/4), min(Q1', Q2') = (1, 0), alpha = 1/2:
    V = 1/4 (1 - 1/2 ln 1/4) + 3/4 (0 - 1/2 ln 3/4); y = r + 0.9 V, and r alone where terminated."""
    v = 0.25 * (1 - 0.5 * math.log(0.25)) + 0.75 * (0 - 0.5 * math.log(0.75))
    assert v == pytest.approx(0.5311675, abs=1e-6)
    logp = torch.log(torch.tensor([[0.25, 0.75], [0.25, 0.75]]))
    q1, q2 = torch.tensor([[1.0, 2.0], [1.0, 2.0]]), torch.tensor([[3.0, 0.0], [3.0, 0.0]])
    y = discrete_soft_q_target(torch.tensor([1.0, 2.0]), torch.tensor([0.0, 1.0]), 0.9, logp, q1, q2, 0.5)
    torch.testing.assert_close(y, torch.tensor([1.0 + 0.9 * v, 2.0]))


def test_actor_loss_by_hand() -> None:
    """mean(alpha logpi - min(Q1, Q2)) = mean(0.1 * -1 - 1, 0.1 * 0.5 - 0) = -0.525; d/dlogpi = alpha / batch."""
    logp = torch.tensor([-1.0, 0.5], requires_grad=True)
    q1 = torch.tensor([1.0, 3.0], requires_grad=True)
    loss = actor_loss(q1, torch.tensor([2.0, 0.0]), logp, 0.1)
    torch.testing.assert_close(loss, torch.tensor(-0.525))
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([0.05, 0.05]))
    torch.testing.assert_close(q1.grad, torch.tensor([-0.5, 0.0]))  # only where Q1 is the smaller


def test_discrete_actor_loss_by_hand() -> None:
    """sum_a pi (alpha log pi - min Q) with pi = (1/2, 1/2), alpha = 1, min Q = (1, 3): 1/2 (ln 1/2 - 1) +
    1/2 (ln 1/2 - 3) = ln 1/2 - 2."""
    logp = torch.log(torch.tensor([[0.5, 0.5]]))
    loss = discrete_actor_loss(logp, torch.tensor([[1.0, 5.0]]), torch.tensor([[2.0, 3.0]]), 1.0)
    torch.testing.assert_close(loss, torch.tensor(math.log(0.5) - 2.0))


def test_alpha_loss_by_hand_and_its_direction() -> None:
    """alpha = 1/2, logpi = (-1, -3), target entropy -1: loss = -ln(1/2) * mean(-2, -4) = 3 ln(1/2); its gradient
    in log alpha is 3 > 0, so descent lowers alpha: the entropy estimate (2) is above the target (-1)."""
    log_alpha = torch.tensor(math.log(0.5), requires_grad=True)
    logp = torch.tensor([-1.0, -3.0], requires_grad=True)
    loss = alpha_loss(log_alpha, logp, -1.0)
    torch.testing.assert_close(loss, torch.tensor(3 * math.log(0.5)))
    loss.backward()
    torch.testing.assert_close(log_alpha.grad, torch.tensor(3.0))
    assert logp.grad is None  # the policy is not trained by the temperature loss
    low_entropy = torch.tensor(0.0, requires_grad=True)
    alpha_loss(low_entropy, torch.tensor([3.0]), -1.0).backward()
    assert low_entropy.grad < 0  # entropy -3 below the target -1: alpha grows


def test_discrete_alpha_loss_by_hand() -> None:
    """Uniform over 4 actions has entropy ln 4; target 1/2 ln 4: loss = -log_alpha (-ln 4 + 1/2 ln 4), gradient
    1/2 ln 4 > 0 (alpha falls toward the lower target)."""
    log_alpha = torch.tensor(0.3, requires_grad=True)
    loss = discrete_alpha_loss(log_alpha, torch.log(torch.full((3, 4), 0.25)), 0.5 * math.log(4))
    torch.testing.assert_close(loss, torch.tensor(0.3 * 0.5 * math.log(4)))
    loss.backward()
    torch.testing.assert_close(log_alpha.grad, torch.tensor(0.5 * math.log(4)))


def test_tanh_log_prob_matches_transformed_distribution() -> None:
    gen = torch.Generator().manual_seed(0)
    mean = torch.randn((64, 3), generator=gen) * 2
    log_std = torch.rand((64, 3), generator=gen) * 3 - 2
    noise = torch.randn((64, 3), generator=gen)
    a, logp = squashed_gaussian(mean, log_std, noise)
    tanh = TanhTransform(cache_size=1)  # the cache hands log_prob the pre-tanh value: no atanh round trip
    dist = TransformedDistribution(Independent(Normal(mean, log_std.exp()), 1), [tanh])
    squashed = tanh(mean + log_std.exp() * noise)
    torch.testing.assert_close(a, squashed)
    torch.testing.assert_close(logp, dist.log_prob(squashed))
    _, far = squashed_gaussian(torch.tensor([[30.0]]), torch.tensor([[0.0]]), torch.tensor([[0.0]]))
    assert torch.isfinite(far).all()  # log(1 - tanh(u)^2) stays finite where tanh(u) rounds to 1


# ---- the agent --------------------------------------------------------------------------------------------------


def test_discrete_twin_mean_averages_the_critics_by_hand() -> None:
    """twin "mean": the target's V(s') and the actor's loss take (Q1 + Q2) / 2 where "min" takes min(Q1, Q2):
    pi = (1/4, 3/4), Q1 = (1, 2), Q2 = (3, 0), alpha 0 (so V is the policy's mean Q): mean (2, 1) gives 1.25,
    min (1, 0) gives 0.25."""
    logp = torch.log(torch.tensor([[0.25, 0.75]]))
    q1, q2 = torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0, 0.0]])
    zero = torch.zeros(1)
    assert float(discrete_soft_q_target(zero, zero, 1.0, logp, q1, q2, 0.0, "mean")) == pytest.approx(1.25)
    assert float(discrete_soft_q_target(zero, zero, 1.0, logp, q1, q2, 0.0)) == pytest.approx(0.25)
    assert float(discrete_actor_loss(logp, q1, q2, 0.0, "mean")) == pytest.approx(-1.25)
    assert float(discrete_actor_loss(logp, q1, q2, 0.0)) == pytest.approx(-0.25)


def test_each_critic_clips_its_own_gradient_norm() -> None:
    """With net.clip_grad_norm c each critic's gradient is scaled to norm c on its own (SLM Lab's optimiser a net),
    not the two critics' joint gradient to c."""
    ctx = AgentContext([make_group("CartPole-v1", 2)], seed=0,
                       memory=ComponentSpec("Replay", ReplayConfig(capacity=1000, batch_size=8)),
                       net=ComponentSpec("MLP", MLPConfig(hid_layers=[16], activation="relu", clip_grad_norm=1e-4)))
    sac = SAC(SACConfig(learning_starts=10_000), ctx)
    feed(sac, 16)
    batch = sac.memories[0].sample(sac.frame)
    sac.critic_optim.step(sac._critic_loss(0, sac.memories[0], batch)[0])
    norms = [float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in q.parameters()]))) for q in
             (sac.q1, sac.q2)]
    assert norms == pytest.approx([1e-4, 1e-4], rel=1e-3)


def test_log_alpha_stays_within_its_bounds() -> None:
    """A temperature learned upward from alpha 1 (a high entropy target) stops at log_alpha_max; downward at
    log_alpha_min."""
    up = make_sac("CartPole-v1", learning_starts=8, target_entropy=5.0, log_alpha_max=0.01, alpha_lr=0.1)
    feed(up, 40)
    assert float(up.log_alpha[0].detach()) == pytest.approx(0.01)
    assert float(up.alpha[0]) == pytest.approx(math.exp(0.01))
    down = make_sac("CartPole-v1", learning_starts=8, target_entropy=-5.0, log_alpha_min=-0.01, alpha_lr=0.1)
    feed(down, 40)
    assert float(down.log_alpha[0].detach()) == pytest.approx(-0.01)


def test_an_agent_file_with_one_critic_optimiser_loads_into_one_a_critic() -> None:
    """Agent files written before each critic had its own optimiser hold one Adam state over both critics'
    parameters in order; it is shared out, each parameter's moments to its own critic's optimiser."""
    sac = make_sac("CartPole-v1", learning_starts=8)
    joint = torch.optim.Adam([*sac.q1.parameters(), *sac.q2.parameters()], lr=1e-3)
    sum(q(torch.ones(3, 4))[0].sum() for q in (sac.q1, sac.q2)).backward()
    joint.step()
    assert isinstance(sac.critic_optim, SplitOptim)
    sac.critic_optim.load_state_dict(joint.state_dict())
    for part, q in zip(sac.critic_optim.parts, (sac.q1, sac.q2)):
        for p in q.parameters():
            assert torch.equal(part.opt.state[p]["exp_avg"], joint.state[p]["exp_avg"])


def test_discrete_critic_loss_with_fixed_weights_by_hand() -> None:
    """Constant nets: pi(.|s') = (1/4, 3/4), target critics (1, 2) and (3, 0), critics (1/2, -1) and (0, 2), alpha
    1/2, gamma 0.9; rows (r 1, a 1, not terminated) and (r 2, a 0, terminated)."""
    sac = make_sac("CartPole-v1", alpha=0.5, gamma=0.9)
    constant(sac.actor, [[math.log(0.25), math.log(0.75)]])
    constant(sac.q1_target, [[1.0, 2.0]])
    constant(sac.q2_target, [[3.0, 0.0]])
    constant(sac.q1, [[0.5, -1.0]])
    constant(sac.q2, [[0.0, 2.0]])
    obs = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32)
    batch = ReplayBatch(obs, np.array([1, 0]), np.array([1.0, 2.0], np.float32), obs + 1,
                        np.array([0.0, 1.0], np.float32), np.ones(2, np.float32), np.arange(2))
    v = 0.25 * (1 - 0.5 * math.log(0.25)) + 0.75 * (0 - 0.5 * math.log(0.75))
    y = [1 + 0.9 * v, 2.0]
    expected = ((-1.0 - y[0]) ** 2 + (0.5 - y[1]) ** 2) / 2 + ((2.0 - y[0]) ** 2 + (0.0 - y[1]) ** 2) / 2
    assert float(sac._critic_loss(0, sac.memories[0], batch)[0].detach()) == pytest.approx(expected, rel=1e-6)


def test_box_critic_loss_with_fixed_weights_by_hand() -> None:
    """Constant nets: actor mean 0.3 and log std -0.5 everywhere, target critics 2 and 1.5, critics 1 and -1, alpha
    0.2, gamma 0.9; the next action's noise is the agent's generator's next draw."""
    sac = make_sac(alpha=0.2, gamma=0.9)
    constant(sac.actor, [[0.3], [-0.5]])
    constant(sac.q1_target, [[2.0]])
    constant(sac.q2_target, [[1.5]])
    constant(sac.q1, [[1.0]])
    constant(sac.q2, [[-1.0]])
    obs = np.zeros((3, 3), np.float32)
    rewards, term = np.array([1.0, -1.0, 0.5], np.float32), np.array([0.0, 1.0, 0.0], np.float32)
    batch = ReplayBatch(obs, np.zeros((3, 1), np.float32), rewards, obs, term, np.ones(3, np.float32), np.arange(3))
    sac.gen.manual_seed(7)
    noise = torch.randn((3, 1), generator=torch.Generator().manual_seed(7)).numpy()[:, 0].astype(np.float64)
    u = 0.3 + math.exp(-0.5) * noise
    logp = -0.5 * noise ** 2 + 0.5 - 0.5 * math.log(2 * math.pi) - np.log(1 - np.tanh(u) ** 2)
    y = rewards + 0.9 * (1 - term) * (1.5 - 0.2 * logp)
    expected = np.mean((1.0 - y) ** 2) + np.mean((-1.0 - y) ** 2)
    assert float(sac._critic_loss(0, sac.memories[0], batch)[0].detach()) == pytest.approx(expected, rel=1e-5)


def test_box_actions_are_squashed_into_the_bounds_and_stored_back_in_unit_range() -> None:
    sac = make_sac(learning_starts=0)
    obs = np.random.default_rng(1).normal(size=(2, 3)).astype(np.float32)
    a = sac.act(0, obs)
    assert a.shape == (2, 1) and a.dtype == np.float32 and (np.abs(a) <= 2.0).all()
    sac.set_training(False)
    with torch.no_grad():
        mean = sac.actor(torch.from_numpy(obs))[0].numpy()
    np.testing.assert_allclose(sac.act(0, obs), 2.0 * np.tanh(mean), rtol=1e-6)  # greedy: tanh(mean), scaled
    np.testing.assert_array_equal(sac.act(0, obs), sac.act(0, obs))
    np.testing.assert_allclose(sac._stored_action(0, np.array([[-2.0], [1.0]], np.float32)), [[-1.0], [0.5]])


def test_random_actions_before_learning_starts_and_no_training() -> None:
    sac = make_sac(learning_starts=40, train_freq=1)
    feed(sac, 19)  # 38 frames
    assert sac.opt_step == 0 and len(sac.memories[0]) == 38
    acts = sac.memories[0].actions[:38, 0]
    assert acts.min() < -0.8 and acts.max() > 0.8  # uniform over the whole range, not the initial policy's
    feed(sac, 1)  # 40 frames
    assert sac.opt_step == 1 and np.isfinite(sac.last_loss) and np.isfinite(sac.last_actor_loss)


def test_replay_keeps_true_next_obs_and_bootstraps_truncation() -> None:
    sac = make_sac(learning_starts=10**6)
    obs, next_obs, final = np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32), np.full((2, 3), 7.0, np.float32)
    sac.update(0, Transition(obs, np.array([[1.0], [-2.0]], np.float32), np.ones(2), next_obs,
                             np.array([True, False]), np.array([False, True]), final))
    mem = sac.memories[0]
    np.testing.assert_array_equal(mem.next_obs[:2], final)  # both ended: the true last obs, not the reset one
    np.testing.assert_array_equal(mem.terminated[:2], [1.0, 0.0])  # truncation keeps bootstrapping
    np.testing.assert_allclose(mem.actions[:2], [[0.5], [-1.0]])


def test_training_cadence_policy_frequency_and_polyak_targets() -> None:
    sac = make_sac(learning_starts=10, train_freq=4, gradient_steps=3, policy_frequency=2, target_update_freq=3,
                   polyak_coef=0.5)
    feed(sac, 4)  # 8 frames
    assert sac.opt_step == 0
    target_before = [p.detach().clone() for p in sac.target_params]
    actor_before = [p.detach().clone() for p in sac.actor.parameters()]
    alpha_before = float(sac.log_alpha[0].detach())
    feed(sac, 1, seed=1)  # 10 frames: 3 critic steps; the actor and alpha step after the 2nd, the targets after the 3rd
    assert sac.opt_step == 3
    for b, t, c in zip(target_before, sac.target_params, sac.critic_params):
        torch.testing.assert_close(t, 0.5 * b + 0.5 * c)
    assert any(not torch.equal(b, p) for b, p in zip(actor_before, sac.actor.parameters()))
    assert float(sac.log_alpha[0].detach()) != alpha_before
    assert all(not p.requires_grad for p in sac.target_params) and all(p.requires_grad for p in sac.critic_params)
    feed(sac, 1, seed=2)  # 12 frames: not yet
    assert sac.opt_step == 3
    feed(sac, 1, seed=3)
    assert sac.opt_step == 6


def test_fixed_temperature_and_target_entropy_defaults() -> None:
    fixed = make_sac(learning_starts=0, alpha=0.05, learn_alpha=False)
    feed(fixed, 5)
    assert fixed.opt_step > 0 and fixed.alpha_optim is None and float(fixed.alpha[0]) == pytest.approx(0.05)
    assert make_sac().target_entropy == [-1.0]
    assert make_sac("CartPole-v1").target_entropy == [pytest.approx(0.89 * math.log(2))]
    assert make_sac("CartPole-v1", target_entropy=0.1).target_entropy == [0.1]
    with pytest.raises(ValueError, match="alpha"):
        make_sac(alpha=0.0)


def test_nstep_rows_use_their_discounts() -> None:
    sac = make_sac(n_step=3, gamma=0.5, learning_starts=10**6)
    for t in range(4):
        obs = np.full((2, 3), 0.1 * t, np.float32)
        sac.update(0, Transition(obs, np.zeros((2, 1), np.float32), np.ones(2), obs + 0.1, np.zeros(2, bool),
                                 np.zeros(2, bool), obs))
    mem = sac.memories[0]
    assert len(mem) == 4
    np.testing.assert_allclose(mem.rewards[:4], 1.75)
    np.testing.assert_allclose(mem.discounts[:4], 0.125)


def test_prioritized_replay_gets_priorities() -> None:
    mem = ComponentSpec("PrioritizedReplay", PrioritizedReplayConfig(capacity=64, batch_size=8))
    sac = make_sac(memory=mem, learning_starts=8, train_freq=8, gradient_steps=2)
    feed(sac, 4, end_every=2)
    assert sac.opt_step == 2 and len(np.unique(sac.memories[0].tree.get(np.arange(8)))) > 1


def test_eval_mode_is_greedy_and_stores_nothing() -> None:
    sac = make_sac("CartPole-v1", learning_starts=0)
    feed(sac, 3)
    sac.set_training(False)
    obs = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32)
    with torch.no_grad():
        greedy = sac.actor(torch.from_numpy(obs))[0].argmax(1).numpy()
    np.testing.assert_array_equal(sac.act(0, obs), greedy)
    frames, stored = sac.frame, len(sac.memories[0])
    feed(sac, 3)
    assert sac.frame == frames + 6 and len(sac.memories[0]) == stored


def test_checkpoint_round_trip_resumes_bit_for_bit(tmp_path: Path) -> None:
    """Save after training, load into an agent built with another seed: the state is the saved one, and both go on
    to the same actions and weights."""
    sac = make_sac(learning_starts=6, num=3, n_step=2)
    feed(sac, 10, end_every=3)
    save_agent(sac, tmp_path / "a.pt")
    save_memory(sac, tmp_path / "m.pt")
    other = make_sac(learning_starts=6, num=3, n_step=2, seed=5)
    load_agent(other, tmp_path / "a.pt")
    load_memory(other, tmp_path / "m.pt")
    saved = torch.load(tmp_path / "a.pt", weights_only=True)
    assert {"actor", "q1", "q2", "q1_target", "q2_target", "actor_optim", "critic_optim", "alpha_optim", "log_alpha",
            "rng", "gen", "frame", "opt_step", "next_train_frame"} <= set(saved)
    assert (other.frame, other.opt_step) == (sac.frame, sac.opt_step) and sac.opt_step > 0
    sac.nsteps[0].reset()  # unfinished n-step rows are not kept in checkpoints
    for algo in (sac, other):
        feed(algo, 8, seed=3, end_every=3)
    for name in ("actor", "q1", "q2", "q1_target", "q2_target"):
        for k, v in getattr(sac, name).state_dict().items():
            assert torch.equal(v, getattr(other, name).state_dict()[k]), (name, k)
    assert torch.equal(sac.log_alpha, other.log_alpha) and sac.opt_step == other.opt_step
    np.testing.assert_array_equal(sac.memories[0].actions, other.memories[0].actions)


def test_masks_and_unsuitable_spaces_are_refused() -> None:
    masked = BodyGroup(0, 0, "game", gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(3), 2, masked=True)
    with pytest.raises(ValueError, match="legal-action masks"):
        SAC(SACConfig(), AgentContext([masked], seed=0))
    vector = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    key, message = agent_problem(ComponentSpec("SAC"), None, None, [(vector, gym.spaces.MultiDiscrete([3, 2]))])
    assert key == "algorithm.name" and message.startswith("SAC takes Box or Discrete actions; got MultiDiscrete")
    key, message = agent_problem(ComponentSpec("SAC"), None, None,
                                 [(vector, gym.spaces.Box(-np.inf, np.inf, (2,), np.float32))])
    assert key == "algorithm.name" and "bounds" in message
    discrete = [(vector, gym.spaces.Discrete(2))]
    assert agent_problem(ComponentSpec("SAC"), ComponentSpec("OnPolicyBatch"), None, discrete)[0] == "memory.name"
    assert agent_problem(ComponentSpec("SAC", SACConfig(alpha=0.0)), None, None, discrete) == (
        "algorithm.alpha", "a learned temperature starts above 0; got 0.0")
    key, message = agent_problem(ComponentSpec("SAC", SACConfig(log_alpha_min=1.0, log_alpha_max=0.0)), None, None,
                                 discrete)
    assert key == "algorithm.log_alpha_max" and "at least its lower bound 1.0" in message
    image = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    group = BodyGroup(0, 0, "pixels", image, gym.spaces.Box(-1, 1, (2,), np.float32), 2)
    with pytest.raises(ValueError, match="net.name: SAC's critics"):
        SAC(SACConfig(), AgentContext([group], seed=0, memory=ComponentSpec("Replay", ReplayConfig(capacity=8)),
                                      net=ComponentSpec("ConvNet")))


# ---- sessions ---------------------------------------------------------------------------------------------------


def bench_spec(**algorithm: Any) -> dict[str, Any]:
    raw = json.loads((ROOT / "spec" / "benchmark" / "sac_pendulum.json").read_text())
    raw["agent"][0]["algorithm"].update(algorithm)
    raw["agent"][0]["memory"]["batch_size"] = 32
    return raw


def test_session_with_the_benchmark_spec_runs() -> None:
    raw = bench_spec(learning_starts=100)
    raw["body"]["num"] = 2
    raw["env"][0]["max_frame"] = 300
    space, result = train(raw)
    agent = space.agent_space.agents[0]
    assert result.env_frames == [300] and agent.frame == 300
    assert agent.opt_step == 101 and np.isfinite(agent.last_loss)  # a round per update from frame 100 on


def test_discrete_sac_on_cartpole() -> None:
    raw = {"agent": [{"algorithm": {"name": "SAC", "learning_starts": 200, "train_freq": 4},
                      "memory": {"name": "Replay", "capacity": 5000, "batch_size": 32},
                      "net": {"name": "MLP", "hid_layers": [32], "activation": "relu"}}],
           "env": [{"name": "CartPole-v1", "max_frame": 1500}], "body": {"num": 2}, "meta": {"random_seed": 0}}
    space, result = train(raw)
    agent = space.agent_space.agents[0]
    assert agent.discrete == [True] and agent.frame >= 1000
    assert agent.opt_step > 100 and np.isfinite(agent.last_loss) and float(agent.log_alpha[0].detach()) != 0.0
    assert sum(len(m.rows) for m in result.metrics.values()) > 10


def test_hydra_agent_over_box_and_discrete_signatures() -> None:
    """One SAC agent with bodies in CartPole (Discrete) and Pendulum (Box): a head pair and a temperature each."""
    raw = {"agent": [{"algorithm": {"name": "SAC", "learning_starts": 50},
                      "memory": {"name": "Replay", "capacity": 1000, "batch_size": 16},
                      "net": {"name": "Hydra", "in_layers": [16], "hid_layers": [16]}}],
           "env": [{"name": "CartPole-v1", "max_frame": 200}, {"name": "Pendulum-v1", "max_frame": 200}],
           "body": {"num": 2}, "meta": {"random_seed": 0}}
    space, result = train(raw)
    agent = space.agent_space.agents[0]
    assert sorted(agent.discrete) == [False, True] and min(result.env_frames) >= 200
    assert agent.opt_step > 0 and (agent.log_alpha != 0).all()


@pytest.mark.parametrize("obs", OBS_KINDS)
def test_each_observation_space_kind(obs: str) -> None:
    for act in [a for a in ACT_KINDS if a in ("discrete", "box")]:
        raw = {"agent": [{"algorithm": {"name": "SAC", "learning_starts": 16},
                          "memory": {"name": "Replay", "capacity": 500, "batch_size": 8},
                          "net": {"name": "MLP", "hid_layers": [8]}}],
               "env": [{"name": "tests.space_envs:SpaceEnv", "kwargs": {"obs": obs, "act": act}, "max_frame": 60}],
               "body": {"num": 2}, "meta": {"random_seed": 0}}
        space, result = train(raw)
        assert result.env_frames == [60] and space.agent_space.agents[0].opt_step > 0


def test_hydra_config_is_used_for_every_net() -> None:
    groups = [make_group("Pendulum-v1", 1, 0), make_group("MountainCarContinuous-v0", 1, 1)]
    sac = SAC(SACConfig(), AgentContext(groups, seed=0, memory=ComponentSpec("Replay", ReplayConfig(capacity=8)),
                                        net=ComponentSpec("Hydra", HydraConfig(in_layers=[8], hid_layers=[8]))))
    assert len(sac.actor.in_heads) == len(sac.q1.in_heads) == 2 and sac.target_entropy == [-1.0, -1.0]
    assert sac.q1.in_heads[0][0].in_features == 3 + 1 and sac.q1.in_heads[1][0].in_features == 2 + 1


def test_training_rounds_report_stats() -> None:
    sac = make_sac(learning_starts=4, policy_frequency=2)
    feed(sac, 4)
    reports = sac.stats.drain()
    assert [frame for frame, _ in reports] == [4, 6, 8]
    keys = {"train/loss", "train/q_mean", "train/alpha", "train/lr", "train/grad_norm"}
    assert all(keys <= set(r) and all(math.isfinite(v) for v in r.values()) for _, r in reports)
    assert ["train/entropy" in r for _, r in reports] == [False, True, False]  # the actor steps every 2nd round
    assert reports[1][1]["train/actor_loss"] == pytest.approx(sac.last_actor_loss)  # the only actor step so far
