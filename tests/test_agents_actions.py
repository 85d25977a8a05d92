"""MultiDiscrete and MultiBinary actions: the factored categorical policy, REINFORCE / A2C / PPO / Random acting and
updating on them without a session, and a PPO learning check on a small MultiDiscrete bandit."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from slm_lab_like.agents.a2c import A2C, A2CConfig
from slm_lab_like.agents.base import AgentContext, BodyGroup, ComponentSpec, NoConfig, Transition
from slm_lab_like.agents.checkpoint import load_agent, save_agent
from slm_lab_like.agents.memory import OnPolicyBatchConfig
from slm_lab_like.agents.net import MLP, MLPConfig, OptimConfig
from slm_lab_like.agents.onpolicy import OnPolicyAlgorithm
from slm_lab_like.agents.policy import ActorCritic, action_layout
from slm_lab_like.agents.ppo import PPO, PPOConfig
from slm_lab_like.agents.random_agent import BatchSampler, Random
from slm_lab_like.agents.reinforce import REINFORCE, REINFORCEConfig

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
SPACES = {
    "multidiscrete": gym.spaces.MultiDiscrete([3, 2, 4]),
    "multidiscrete_2d": gym.spaces.MultiDiscrete([[2, 3], [4, 2]], dtype=np.int32),
    "multidiscrete_even": gym.spaces.MultiDiscrete([3, 3]),
    "multibinary": gym.spaces.MultiBinary(3),
    "multibinary_2d": gym.spaces.MultiBinary((2, 2)),
}
LEARNERS = {"PPO": (PPO, PPOConfig(n_epochs=2, minibatch_size=8)), "A2C": (A2C, A2CConfig()),
            "REINFORCE": (REINFORCE, REINFORCEConfig())}


def group(action_space: gym.Space, num: int = 4, masked: bool = False) -> BodyGroup:
    return BodyGroup(0, 0, "test", OBS, action_space, num, masked=masked)


def make_learner(name: str, action_space: gym.Space, num: int = 4, n_steps: int = 8) -> OnPolicyAlgorithm:
    cls, config = LEARNERS[name]
    ctx = AgentContext([group(action_space, num)], seed=0,
                       memory=ComponentSpec("OnPolicyBatch", OnPolicyBatchConfig(n_steps=n_steps)),
                       net=ComponentSpec("MLP", MLPConfig(hid_layers=[16])))
    return cls(config, ctx)


def run_steps(algo: OnPolicyAlgorithm, steps: int, seed: int = 0) -> list[np.ndarray]:
    """Act and update `steps` times with random observations, rewards and episode ends; the actions taken."""
    rng = np.random.default_rng(seed)
    n = algo.groups[0].num_bodies
    taken = []
    for t in range(steps):
        obs = rng.uniform(-1, 1, (n, 4)).astype(np.float32)
        action = algo.act(0, obs)
        taken.append(action.copy())
        term, trunc = rng.random(n) < 0.2, rng.random(n) < 0.1
        algo.update(0, Transition(obs, action, rng.normal(size=n), obs, term, trunc, obs + 0.5))
    return taken


@pytest.mark.parametrize("space, nvec, width, shape", [
    (gym.spaces.Discrete(5), (5,), 5, ()),
    (gym.spaces.MultiDiscrete([3, 2, 4]), (3, 2, 4), 9, (3,)),
    (gym.spaces.MultiDiscrete([[2, 3], [4, 2]]), (2, 3, 4, 2), 11, (2, 2)),
    (gym.spaces.MultiBinary(3), (2, 2, 2), 6, (3,)),
    (gym.spaces.Box(-1, 1, (2, 3)), None, 6, (2, 3)),
])
def test_action_layout(space: gym.Space, nvec: tuple[int, ...] | None, width: int, shape: tuple[int, ...]) -> None:
    layout = action_layout(space)
    assert (layout.nvec, layout.width, layout.shape) == (nvec, width, shape)
    assert layout.dtype == (np.float32 if nvec is None else np.int64)


@pytest.mark.parametrize("name", ["multidiscrete", "multidiscrete_2d", "multibinary"])
def test_factored_categorical_matches_torch_distributions(name: str) -> None:
    """Log-probs and entropies are sums over independent categoricals, and act's log-probs agree with evaluate's."""
    space = SPACES[name]
    nvec = action_layout(space).nvec
    policy = ActorCritic(MLP, MLPConfig(hid_layers=[8]), [(OBS, space)])
    torch.nn.init.normal_(policy.actor.out.heads[0].weight)  # away from the near-uniform init
    x = torch.randn(64, 4)
    a, logp, _, _ = policy.act(x, 0, False, np.random.default_rng(0))
    assert a.shape == (64,) + space.shape and all(space.contains(policy.env_action(row, 0)) for row in a)
    logits = policy.heads(x, 0)[0].detach()
    dists = [torch.distributions.Categorical(logits=chunk) for chunk in torch.split(logits, list(nvec), dim=1)]
    flat = torch.from_numpy(a.reshape(64, -1))
    expected_logp = sum(d.log_prob(flat[:, i]) for i, d in enumerate(dists))
    expected_entropy = sum(d.entropy() for d in dists)
    got_logp, got_entropy, _ = policy.evaluate(x, torch.from_numpy(a), 0)
    torch.testing.assert_close(got_logp.detach(), expected_logp)
    torch.testing.assert_close(got_entropy.detach(), expected_entropy)
    np.testing.assert_allclose(logp, expected_logp.numpy(), rtol=1e-5, atol=1e-5)


def test_sampling_follows_each_component_distribution() -> None:
    """The numpy sampler draws every component from its own categorical (padding never sampled)."""
    space = gym.spaces.MultiDiscrete([3, 2, 4])
    policy = ActorCritic(MLP, MLPConfig(hid_layers=[8]), [(OBS, space)])
    head = policy.actor.out.heads[0]
    logits = torch.tensor([0.0, 1.0, 2.0, -1.0, 1.0, 0.5, 0.0, -0.5, 3.0])
    with torch.no_grad():
        head.weight.zero_()
        head.bias.copy_(logits)
    a, _, _, _ = policy.act(torch.zeros(20000, 4), 0, False, np.random.default_rng(1))
    for i, chunk in enumerate(torch.split(logits, [3, 2, 4])):
        freq = np.bincount(a[:, i], minlength=len(chunk)) / len(a)
        np.testing.assert_allclose(freq, torch.softmax(chunk, 0).numpy(), atol=0.015)
    greedy, _, _, _ = policy.act(torch.zeros(2, 4), 0, True, np.random.default_rng(1))
    np.testing.assert_array_equal(greedy, [[2, 1, 3], [2, 1, 3]])


@pytest.mark.parametrize("space_name", sorted(SPACES))
@pytest.mark.parametrize("algo_name", sorted(LEARNERS))
def test_learner_acts_and_updates(algo_name: str, space_name: str) -> None:
    space = SPACES[space_name]
    algo = make_learner(algo_name, space)
    before = [p.detach().clone() for p in algo.policy.parameters()]
    taken = run_steps(algo, 16)
    for action in taken:
        assert action.shape == (4,) + space.shape and action.dtype == space.dtype
        assert all(space.contains(row) for row in action)
    assert algo.memories[0].actions.shape == (8, 4) + space.shape
    assert algo.opt_step > 0 and np.isfinite(algo.last_loss)
    assert any(not torch.equal(b, p) for b, p in zip(before, algo.policy.parameters()))
    algo.set_training(False)
    obs = np.zeros((4, 4), np.float32)
    np.testing.assert_array_equal(algo.act(0, obs), algo.act(0, obs))  # greedy in eval mode


@pytest.mark.parametrize("algo_name", sorted(LEARNERS))
def test_learner_takes_actions_it_did_not_choose(algo_name: str) -> None:
    """Actions handed in by the lab (not from act) are evaluated for their log-probs, in the env's dtype."""
    space = SPACES["multibinary"]
    algo = make_learner(algo_name, space, num=2, n_steps=4)
    obs = np.zeros((2, 4), np.float32)
    for _ in range(4):
        action = np.array([[1, 0, 1], [0, 0, 1]], np.int8)
        algo.update(0, Transition(obs, action, np.ones(2), obs, np.zeros(2, bool), np.zeros(2, bool), obs))
    assert algo.opt_step > 0 and np.isfinite(algo.last_loss)


@pytest.mark.parametrize("space_name", sorted(SPACES))
def test_random_acts_in_multi_spaces(space_name: str) -> None:
    space = SPACES[space_name]
    algo = Random(NoConfig(), AgentContext([group(space, 3)], seed=0))
    actions = np.stack([algo.act(0, np.zeros((3, 4), np.float32)) for _ in range(50)])
    assert actions.shape == (50, 3) + space.shape
    assert all(space.contains(row) for row in actions.reshape((-1,) + space.shape))
    assert len(np.unique(actions.reshape(150, -1), axis=0)) > 1


@pytest.mark.parametrize("n,start", [(1, 0), (2, 0), (4, -1), (3, 0), (256, 5), (1 << 16, 0), (1 << 17, 0)])
def test_random_draws_discrete_actions_uniformly_and_reproducibly(n: int, start: int) -> None:
    """Every Discrete draw path (raw bits for 2**k actions, Generator.integers for the rest) gives the space's dtype,
    values in range, each value about equally often over many chunks, the same actions from the same seed."""
    space = gym.spaces.Discrete(n, start=start)
    draws = [iter(BatchSampler(space, 3000, seed)) for seed in (0, 0, 1)]
    a, b, c = (np.stack([next(d) for _ in range(70)]) for d in draws)
    assert a.dtype == space.dtype and a.shape == (70, 3000)
    assert a.min() >= start and a.max() < start + n
    np.testing.assert_array_equal(a, b)
    assert n == 1 or not np.array_equal(a, c)
    if n <= 256:
        counts = np.bincount((a - start).ravel(), minlength=n)
        expected = a.size / n
        assert np.all(np.abs(counts - expected) < 6 * np.sqrt(expected) + 1)


def test_checkpoint_round_trip_multidiscrete(tmp_path: Any) -> None:
    ppo = make_learner("PPO", SPACES["multidiscrete"])
    run_steps(ppo, 8)
    save_agent(ppo, tmp_path / "ppo.pt")
    other = make_learner("PPO", SPACES["multidiscrete"])
    load_agent(other, tmp_path / "ppo.pt")
    ppo.set_training(False)
    other.set_training(False)
    obs = np.random.default_rng(3).uniform(-1, 1, (4, 4)).astype(np.float32)
    np.testing.assert_array_equal(ppo.act(0, obs), other.act(0, obs))


def test_masks_need_discrete_actions() -> None:
    ctx = AgentContext([group(SPACES["multidiscrete"], masked=True)], seed=0)
    with pytest.raises(ValueError, match="legal-action masks need Discrete actions"):
        PPO(PPOConfig(), ctx)


@pytest.mark.parametrize("space", [gym.spaces.MultiDiscrete([3, 2, 4]), gym.spaces.MultiBinary(4)],
                         ids=["multidiscrete", "multibinary"])
def test_ppo_learns_a_contextual_bandit(space: gym.Space) -> None:
    """One-step episodes; the context (a one-hot of two) sets the target action; reward = the share of components
    that hit their target. Random play scores about 0.36 (MultiDiscrete) / 0.5 (MultiBinary); PPO gets >= 0.9."""
    nvec = np.asarray(action_layout(space).nvec)
    targets = np.stack([np.zeros_like(nvec), nvec - 1])  # context 0: every component 0; context 1: the last ones
    ctx = AgentContext([BodyGroup(0, 0, "bandit", gym.spaces.Box(0.0, 1.0, (2,), np.float32), space, 16)], seed=0,
                       memory=ComponentSpec("OnPolicyBatch", OnPolicyBatchConfig(n_steps=8)),
                       net=ComponentSpec("MLP", MLPConfig(hid_layers=[32], optim=OptimConfig(lr=0.01))))
    ppo = PPO(PPOConfig(n_epochs=4, minibatch_size=64), ctx)
    rng = np.random.default_rng(0)
    done = np.ones(16, bool)

    def contexts() -> tuple[np.ndarray, np.ndarray]:
        c = rng.integers(0, 2, 16)
        return c, np.eye(2, dtype=np.float32)[c]

    def greedy_score() -> float:
        ppo.set_training(False)
        c = np.arange(16) % 2
        score = float((ppo.act(0, np.eye(2, dtype=np.float32)[c]).reshape(16, -1) == targets[c]).mean())
        ppo.set_training(True)
        return score

    assert greedy_score() < 0.9
    for _ in range(8 * 30):
        c, obs = contexts()
        action = ppo.act(0, obs)
        reward = (action.reshape(16, -1) == targets[c]).mean(axis=1)
        ppo.update(0, Transition(obs, action, reward, contexts()[1], done, ~done, obs))
    assert greedy_score() >= 0.9
