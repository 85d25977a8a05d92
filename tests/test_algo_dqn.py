"""DQN / DoubleDQN: exploration, replay storage with true next obs, training cadence, target updates, checkpoints."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from slm_lab_like.agents.base import AgentContext, ComponentSpec, Transition
from slm_lab_like.agents.checkpoint import load_agent, save_agent
from slm_lab_like.agents.dqn import DQN, DoubleDQN, DQNConfig, DoubleDQNConfig
from slm_lab_like.agents.explore import boltzmann, epsilon_greedy
from slm_lab_like.agents.memory import PrioritizedReplayConfig, ReplayConfig
from slm_lab_like.agents.net import MLPConfig
from slm_lab_like.agents.schedule import Schedule
from tests.helpers import make_group


def make_dqn(cls: type = DQN, memory: ComponentSpec | None = None, num: int = 2, **cfg: Any) -> DQN:
    ctx = AgentContext([make_group("CartPole-v1", num)], seed=0,
                       memory=memory or ComponentSpec("Replay", ReplayConfig(capacity=1000, batch_size=8)),
                       net=ComponentSpec("MLP", MLPConfig(hid_layers=[16], activation="relu")))
    config_cls = DoubleDQNConfig if cls is DoubleDQN else DQNConfig
    return cls(config_cls(**cfg), ctx)


def feed(algo: DQN, steps: int, trunc_every: int = 0) -> None:
    rng = np.random.default_rng(0)
    n = algo.groups[0].num_bodies
    for t in range(steps):
        obs = rng.normal(size=(n, 4)).astype(np.float32)
        action = algo.act(0, obs)
        trunc = np.zeros(n, bool)
        if trunc_every and t % trunc_every == 0:
            trunc[0] = True
        next_obs = rng.normal(size=(n, 4)).astype(np.float32)
        algo.update(0, Transition(obs, action, np.ones(n), next_obs, np.zeros(n, bool), trunc, next_obs + 5.0))


def test_epsilon_greedy_and_boltzmann() -> None:
    rng = np.random.default_rng(0)
    q = torch.tensor([[0.0, 1.0]]).repeat(10000, 1)
    assert (epsilon_greedy(q, 0.0, rng) == 1).all()
    share_random = (epsilon_greedy(q, 0.5, rng) == 0).mean()
    assert share_random == pytest.approx(0.25, abs=0.02)  # half explore, half of those pick action 0
    p0 = (boltzmann(q, 1.0, rng) == 0).mean()
    assert p0 == pytest.approx(1 / (1 + np.e), abs=0.02)
    assert (boltzmann(q, 0.0, rng) == 1).all()


def test_replay_stores_true_next_obs_and_terminations() -> None:
    dqn = make_dqn(learning_starts=10**6)
    obs = np.zeros((2, 4), np.float32)
    next_obs = np.ones((2, 4), np.float32)
    final = np.full((2, 4), 7.0, np.float32)
    dqn.update(0, Transition(obs, np.array([0, 1]), np.ones(2), next_obs, np.array([True, False]),
                             np.array([False, True]), final))
    mem = dqn.memories[0]
    np.testing.assert_array_equal(mem.next_obs[:2], final)  # both ended: true last obs, not the reset obs
    np.testing.assert_array_equal(mem.terminated[:2], [1.0, 0.0])  # truncation keeps bootstrapping


def test_nstep_replay_rows_through_update() -> None:
    """n_step = 2, gamma = 0.5, two bodies: body 0 terminates at its 2nd step, body 1 is truncated at its 3rd."""
    dqn = make_dqn(n_step=2, gamma=0.5, learning_starts=10**6)
    mem = dqn.memories[0]

    def step(t: int, reward: list[float], term: list[bool], trunc: list[bool]) -> None:
        obs = np.full((2, 4), t, np.float32)
        final = np.full((2, 4), 100 + t, np.float32)
        dqn.update(0, Transition(obs, np.array([0, 1]), np.array(reward), obs + 1, np.array(term), np.array(trunc),
                                 final))

    step(0, [1, 1], [False, False], [False, False])
    assert len(mem) == 0
    step(1, [2, 3], [True, False], [False, False])  # body 0: both pending leave, cut; body 1: step 0 leaves
    assert len(mem) == 3
    rows = sorted(zip(mem.obs[:3, 0], mem.actions[:3], mem.rewards[:3], mem.next_obs[:3, 0], mem.terminated[:3],
                      mem.discounts[:3]))
    assert rows == [(0, 0, 2.0, 101, 1, 0.25), (0, 1, 2.5, 2, 0, 0.25), (1, 0, 2.0, 101, 1, 0.5)]
    step(2, [4, 5], [False, False], [False, True])  # body 1 truncated: bootstrap from its true last obs
    rows = sorted(zip(mem.obs[3:5, 0], mem.actions[3:5], mem.rewards[3:5], mem.next_obs[3:5, 0],
                      mem.terminated[3:5], mem.discounts[3:5]))
    assert rows == [(1, 1, 5.5, 102, 0, 0.25), (2, 1, 5.0, 102, 0, 0.5)]
    assert len(mem) == 5  # body 0's step 2 is still pending


def test_nstep_target_uses_row_discounts() -> None:
    """The TD target of an n-step row is R + discount * max Q_target(s'), not R + gamma * ...."""
    dqn = make_dqn(n_step=3, gamma=0.5, learning_starts=10**6, loss="mse")
    for t in range(4):
        obs = np.full((2, 4), 0.1 * t, np.float32)
        dqn.update(0, Transition(obs, np.array([0, 1]), np.ones(2), obs + 0.1, np.zeros(2, bool),
                                 np.zeros(2, bool), obs))
    mem = dqn.memories[0]
    assert len(mem) == 4  # the two step-0 and the two step-1 rows: 3 rewards each, discount 0.5^3
    np.testing.assert_allclose(mem.rewards[:4], 1.75)
    np.testing.assert_allclose(mem.discounts[:4], 0.125)
    mem.rng = np.random.default_rng(0)
    b = mem.sample()
    with torch.no_grad():
        nq = dqn.target_net(torch.from_numpy(b.next_obs))[0].max(1).values
        q = dqn.q_net(torch.from_numpy(b.obs))[0].gather(1, torch.from_numpy(b.actions)[:, None])[:, 0]
        expected = ((q - (1.75 + 0.125 * nq)) ** 2).mean()
        loss, _ = dqn._group_loss(0, mem, b)
    torch.testing.assert_close(loss, expected)


def test_training_cadence_and_replacement_target() -> None:
    dqn = make_dqn(learning_starts=20, train_freq=4, gradient_steps=3, target_update_freq=6)
    feed(dqn, 9)  # 18 frames: before learning_starts
    assert dqn.opt_step == 0
    feed(dqn, 1)  # 20 frames
    assert dqn.opt_step == 3 and np.isfinite(dqn.last_loss)
    feed(dqn, 2)  # 24 frames: next round
    assert dqn.opt_step == 6
    feed(dqn, 2)  # the round starting at opt_step 6 copies the online net into the target first
    online_at_copy = dqn.q_net.state_dict()
    assert dqn.opt_step == 9
    changed = any(not torch.equal(dqn.target_net.state_dict()[k], online_at_copy[k]) for k in online_at_copy)
    assert changed  # the online net moved on after the copy
    assert all(not p.requires_grad for p in dqn.target_net.parameters())


def test_polyak_target_moves_by_tau() -> None:
    dqn = make_dqn(learning_starts=0, train_freq=2, gradient_steps=1, target_update="polyak", polyak_coef=0.5)
    before = [p.detach().clone() for p in dqn.target_net.parameters()]
    feed(dqn, 1)
    for b, t, o in zip(before, dqn.target_net.parameters(), dqn.q_net.parameters()):
        torch.testing.assert_close(t, 0.5 * b + 0.5 * o)


def test_double_dqn_registers_with_double_on() -> None:
    ddqn = make_dqn(DoubleDQN, learning_starts=0, train_freq=2)
    assert ddqn.config.double
    feed(ddqn, 4)
    assert ddqn.opt_step > 0


def test_prioritized_replay_updates_priorities() -> None:
    mem = ComponentSpec("PrioritizedReplay", PrioritizedReplayConfig(capacity=64, batch_size=8))
    dqn = make_dqn(memory=mem, learning_starts=8, train_freq=8, gradient_steps=2)
    feed(dqn, 4, trunc_every=2)
    leaves = dqn.memories[0].tree.get(np.arange(8))
    assert dqn.opt_step == 2 and len(np.unique(leaves)) > 1  # sampled rows got their own |td| priorities


def test_epsilon_schedule_and_eval_greedy() -> None:
    dqn = make_dqn(epsilon=Schedule("linear", start=1.0, end=0.0, frames=10), learning_starts=10**6)
    obs = np.zeros((2, 4), np.float32)
    feed(dqn, 5)  # 10 frames: epsilon reached 0
    greedy = dqn.q_net(torch.from_numpy(obs))[0].argmax(1).numpy()
    np.testing.assert_array_equal(dqn.act(0, obs), greedy)
    dqn.set_training(False)
    frames = dqn.frame
    feed(dqn, 3)
    assert len(dqn.memories[0]) == 10 and dqn.frame == frames + 6


def test_dqn_rejects_box_actions() -> None:
    ctx = AgentContext([make_group("Pendulum-v1", 1)], seed=0)
    with pytest.raises(ValueError, match="Discrete"):
        DQN(DQNConfig(), ctx)


def test_checkpoint_round_trip(tmp_path: Any) -> None:
    dqn = make_dqn(learning_starts=0, train_freq=4)
    feed(dqn, 10)
    save_agent(dqn, tmp_path / "dqn.pt")
    other = make_dqn(learning_starts=0, train_freq=4)
    load_agent(other, tmp_path / "dqn.pt")
    assert (other.frame, other.opt_step) == (dqn.frame, dqn.opt_step)
    for k, v in dqn.q_net.state_dict().items():
        assert torch.equal(v, other.q_net.state_dict()[k])
        assert torch.equal(dqn.target_net.state_dict()[k], other.target_net.state_dict()[k])


def test_random_legal_picks_only_legal_actions_uniformly() -> None:
    from slm_lab_like.agents.explore import random_legal

    mask = np.array([[True, False, True, False], [False, False, False, True], [False] * 4])
    picks = np.stack([random_legal(mask, np.random.default_rng(s)) for s in range(2000)])
    assert set(picks[:, 0]) == {0, 2} and abs((picks[:, 0] == 0).mean() - 0.5) < 0.05
    assert (picks[:, 1] == 3).all() and (picks[:, 2] == 0).all()  # the one legal action; 0 where none is


def run_frames(dqn: DQN, steps: int, seed: int = 0, turns: bool = False) -> list[tuple[int, float]]:
    """Act and update `steps` times with random episode ends (and, with `turns`, random acting rows); (frame, loss)
    after every update that trained."""
    rng = np.random.default_rng(seed)
    n = dqn.groups[0].num_bodies
    losses = []
    for _ in range(steps):
        obs = rng.normal(size=(n, 4)).astype(np.float32)
        before = dqn.opt_step
        acting = rng.random(n) < 0.6 if turns else None
        dqn.update(0, Transition(obs, dqn.act(0, obs), rng.normal(size=n), obs + 0.1, rng.random(n) < 0.1,
                                 rng.random(n) < 0.05, obs + 1.0, completed=acting))
        if dqn.opt_step > before:
            losses.append((dqn.frame, dqn.last_loss))
    return losses


def test_nstep_training_waits_for_the_first_finished_return() -> None:
    """n_step 3 with learning_starts 0 used to step the optimiser on empty replays ("element 0 of tensors does not
    require grad"): training now starts at the first round with a stored n-step transition."""
    dqn = make_dqn(n_step=3, learning_starts=0, train_freq=1)
    obs = np.zeros((2, 4), np.float32)
    for t in range(3):
        assert dqn.opt_step == 0 and len(dqn.memories[0]) == 0
        dqn.update(0, Transition(obs, np.array([0, 1]), np.ones(2), obs, np.zeros(2, bool), np.zeros(2, bool), obs))
    assert len(dqn.memories[0]) == 2 and dqn.opt_step == 1 and np.isfinite(dqn.last_loss)
    empty = make_dqn(n_step=3, learning_starts=0)
    empty.train()  # nothing stored: no step, no error
    assert empty.opt_step == 0


@pytest.mark.parametrize("memory", ["Replay", "PrioritizedReplay"])
@pytest.mark.parametrize("batch_size", [1, 5, 64])
@pytest.mark.parametrize("learning_starts", [0, 1, 10])
@pytest.mark.parametrize("n_step", [1, 2, 3, 5])
def test_updates_are_sound_for_any_n_step_and_learning_starts(n_step: int, learning_starts: int, batch_size: int,
                                                              memory: str) -> None:
    config_cls = PrioritizedReplayConfig if memory == "PrioritizedReplay" else ReplayConfig
    dqn = make_dqn(memory=ComponentSpec(memory, config_cls(capacity=100, batch_size=batch_size)), num=3,
                   n_step=n_step, learning_starts=learning_starts, train_freq=3, target_update_freq=10)
    trained = run_frames(dqn, 100, seed=n_step + 10 * learning_starts + batch_size, turns=batch_size == 5)
    assert dqn.opt_step > 0 and len(trained) == dqn.opt_step
    frames, losses = zip(*trained)
    assert min(frames) >= learning_starts and np.isfinite(losses).all()


@settings(max_examples=30, deadline=None)
@given(n_step=st.integers(1, 6), learning_starts=st.integers(0, 20), batch_size=st.integers(1, 40),
       num=st.integers(1, 4), train_freq=st.integers(1, 5), turns=st.booleans(), seed=st.integers(0, 1000))
def test_updates_are_sound_property(n_step: int, learning_starts: int, batch_size: int, num: int, train_freq: int,
                                    turns: bool, seed: int) -> None:
    dqn = make_dqn(memory=ComponentSpec("Replay", ReplayConfig(capacity=50, batch_size=batch_size)), num=num,
                   n_step=n_step, learning_starts=learning_starts, train_freq=train_freq)
    trained = run_frames(dqn, 60, seed=seed, turns=turns)
    assert all(frame >= learning_starts and np.isfinite(loss) for frame, loss in trained)
