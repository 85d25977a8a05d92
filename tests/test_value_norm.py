"""`value_norm` (PPO, A2C, REINFORCE with a critic): the critic learns standardised returns, its outputs are
de-standardised wherever a value is used, and the statistics are in the checkpoint."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from slm_lab_like.agents.onpolicy import OnPolicyAlgorithm, Rollout
from slm_lab_like.agents.ppo import PPO
from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.load import validate


def spec(algorithm: dict[str, Any], frames: int = 3000) -> dict[str, Any]:
    return {"agent": [{"name": "a", "algorithm": algorithm, "memory": {"name": "OnPolicyBatch", "n_steps": 64},
                       "net": {"name": "MLP", "hid_layers": [32]}}],
            "env": [{"name": "CartPole-v1", "max_frame": frames}], "body": {"product": "outer", "num": 4},
            "meta": {"random_seed": 1}}


def test_the_critic_learns_standardised_returns_and_values_come_back_in_return_units(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[Rollout, np.ndarray, np.ndarray]] = []
    learn = PPO.learn

    def watched(self: OnPolicyAlgorithm, rollouts: list[Rollout]) -> None:
        norm = self.value_norm
        assert norm is not None
        seen.append((rollouts[0], norm.mean.copy(), norm.var.copy()))
        learn(self, rollouts)

    monkeypatch.setattr(PPO, "learn", watched)
    raw = spec({"name": "PPO", "n_epochs": 2, "minibatch_size": 64, "gamma": 0.99, "value_norm": True}, 6000)
    result = Session(validate(raw, "t"), seed=2).run()
    assert len(seen) >= 20 and result.pair_mean_return(0, 0) > 20
    rollout, mean, var = seen[-1]
    assert float(mean) > 5.0  # CartPole's discounted returns, in their own units
    returns = rollout.returns.numpy()
    assert abs(returns.mean()) < 1.5 and 0.2 < returns.std() < 3.0  # what the critic regresses on: standardised


def test_values_of_a_normalised_critic_are_de_standardised_where_they_are_used() -> None:
    from slm_lab_like.aeb.space import AEBSpace

    space = AEBSpace.build(validate(spec({"name": "A2C", "value_norm": True}), "t"), 0)
    try:
        agent = space.agent_space.agents[0]
        assert isinstance(agent, OnPolicyAlgorithm) and agent.value_norm is not None
        agent.value_norm.update(np.array([10.0, 30.0]))
        obs = np.full((4, 4), 0.1, np.float32)
        raw = agent.policy.value(torch.from_numpy(obs), 0).detach().numpy()
        np.testing.assert_allclose(agent._values(raw), raw * np.sqrt(agent.value_norm.var + 1e-8)
                                   + agent.value_norm.mean, rtol=1e-5)
        state = agent.state_dict()
        assert float(state["value_norm"]["mean"]) == pytest.approx(agent.value_norm.mean)
    finally:
        space.close()


def test_value_norm_without_a_critic_is_refused_at_its_key() -> None:
    with pytest.raises(SpecError) as err:
        validate(spec({"name": "REINFORCE", "baseline": "mean", "value_norm": True}), "t")
    assert err.value.path == "agent[0].algorithm.value_norm" and "no critic" in err.value.message
