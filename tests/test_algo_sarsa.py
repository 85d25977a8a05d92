"""SARSA: each body's transition waits for its next action (a'), an episode's end finishes it at once (terminated:
no bootstrap; cut by a time limit: the expected Q under the exploring policy), and rounds come every n_steps."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from slm_lab_like.agents.base import AgentContext, ComponentSpec, Transition
from slm_lab_like.agents.memory import OnPolicyBatchConfig
from slm_lab_like.agents.net import MLPConfig
from slm_lab_like.agents.sarsa import SARSA, SARSAConfig
from tests.helpers import make_group


def make_sarsa(n_steps: int = 100, **config: object) -> SARSA:
    ctx = AgentContext([make_group("CartPole-v1", 2)], seed=0,
                       memory=ComponentSpec("OnPolicyBatch", OnPolicyBatchConfig(n_steps=n_steps)),
                       net=ComponentSpec("MLP", MLPConfig(hid_layers=[16])))
    return SARSA(SARSAConfig(**config), ctx)  # type: ignore[arg-type]


def play(algo: SARSA, steps: int) -> list[np.ndarray]:
    """Body 0 terminates at step 1, body 1 is truncated at step 2; the actions taken, step by step."""
    taken = []
    for t in range(steps):
        obs = np.full((2, 4), t, np.float32)
        action = algo.act(0, obs)
        taken.append(action)
        algo.update(0, Transition(obs, action, np.array([1.0, 2.0]), obs + 0.5, np.array([t == 1, False]),
                                  np.array([False, t == 2]), obs + 0.25))
    return taken


def test_a_transition_waits_for_the_bodys_next_action_and_an_ending_is_finished_at_once() -> None:
    algo = make_sarsa()
    taken = play(algo, 3)
    obs, action, reward, next_obs, next_action, known, terminal = algo.rows[0].take()
    # step 0 of both bodies (finished by step 1's actions), body 0's terminal step 1, body 1's step 1 (finished by
    # step 2's action), body 1's time-limit cut at step 2 (no next action: expected SARSA at its final obs)
    assert obs[:, 0].tolist() == [0, 0, 1, 1, 2]
    assert reward.tolist() == [1.0, 2.0, 1.0, 2.0, 2.0]
    assert known.tolist() == [True, True, False, True, False] and terminal.tolist() == [False, False, True, False,
                                                                                        False]
    assert next_action[:2].tolist() == taken[1].tolist() and next_action[3] == taken[2][1]
    assert next_obs[:, 0].tolist() == [1, 1, 1.25, 2, 2.25]  # the obs a' was chosen at; the final obs at an ending
    assert algo.rows[0].waiting.tolist() == [True, False]


def test_the_expected_q_follows_the_exploring_policy() -> None:
    q = torch.tensor([[1.0, 3.0], [2.0, 0.0]])
    eps = make_sarsa(epsilon=0.2)
    torch.testing.assert_close(eps._expected(q), torch.tensor([0.8 * 3 + 0.2 * 2, 0.8 * 2 + 0.2 * 1]))
    hot = make_sarsa(explore="boltzmann", temperature=1.0)
    torch.testing.assert_close(hot._expected(q), (torch.softmax(q, 1) * q).sum(1))


def test_a_round_comes_every_n_steps_per_body_and_moves_q_toward_the_target() -> None:
    algo = make_sarsa(n_steps=2, epsilon=0.0, gradient_steps=20)
    play(algo, 3)  # 5 finished rows >= 2 steps x 2 bodies: one round, after step 2
    assert algo.opt_step == 20 and np.isfinite(algo.last_loss) and algo.rows[0].rows == 0
    state = algo.state_dict()
    fresh = make_sarsa(n_steps=2)
    fresh.load_state_dict(state)
    x = torch.zeros(1, 4)
    torch.testing.assert_close(fresh.q_net(x, 0)[0], algo.q_net(x, 0)[0])


@pytest.mark.parametrize("space", ["Pendulum-v1"])
def test_sarsa_refuses_continuous_actions(space: str) -> None:
    assert SARSA.action_problem(make_group(space, 1).action_space) is not None
