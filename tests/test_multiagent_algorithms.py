"""Learning algorithms in turn-based / masked envs: legal actions only, transitions stitched per body, skips in GAE."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")

from slm_lab_like.agents.losses import gae, nstep_returns  # noqa: E402
from slm_lab_like.aeb.space import AEBSpace  # noqa: E402
from slm_lab_like.experiment.session import Session  # noqa: E402
from slm_lab_like.spec.load import validate  # noqa: E402
from tests.helpers import train  # noqa: E402

ALGOS = {
    "DQN": {"algorithm": {"name": "DQN", "learning_starts": 200, "epsilon": 0.3},
            "memory": {"name": "Replay", "batch_size": 32}},
    "DoubleDQN": {"algorithm": {"name": "DoubleDQN", "learning_starts": 200},
                  "memory": {"name": "PrioritizedReplay", "batch_size": 32}},
    "PPO": {"algorithm": {"name": "PPO", "n_epochs": 2, "minibatch_size": 32},
            "memory": {"name": "OnPolicyBatch", "n_steps": 64}},
    "A2C": {"algorithm": {"name": "A2C"}, "memory": {"name": "OnPolicyBatch", "n_steps": 16}},
    "REINFORCE": {"algorithm": {"name": "REINFORCE"}, "memory": {"name": "OnPolicyBatch", "n_steps": 16}},
}


def selfplay(algo: str, frames: int = 1500) -> dict:
    return {"agent": [{"name": "learner", **ALGOS[algo]}],
            "env": [{"name": "connect_four", "max_frame": frames, "kwargs": {"illegal_move": "raise"}}],
            "body": {"product": "outer", "num": 2}, "meta": {"log_frequency": 10**9}}


@pytest.mark.parametrize("algo", list(ALGOS))
def test_learners_play_only_legal_moves_in_self_play(algo: str) -> None:
    result = Session(validate(selfplay(algo), "t"), seed=0).run()  # an illegal move would raise
    rows = [r for m in result.metrics.values() for r in m.rows]
    assert len(rows) > 60 and max(r["opt_step"] for r in rows) > 0


def test_dqn_replay_holds_each_seats_own_stitched_transitions() -> None:
    space, _ = train(selfplay("DQN", frames=2000))
    mem = space.agent_space.agents[0].memories[0]
    n = mem.size
    moves = space.env_space.envs[0].clock.frame
    assert moves - 2 <= n <= moves  # one transition per completed move (each seat may have one still open)
    obs, nxt = mem.obs[:n].reshape(n, 6, 7, 2), mem.next_obs[:n].reshape(n, 6, 7, 2)
    act, term, rew = mem.actions[:n], mem.terminated[:n] > 0, mem.rewards[:n]
    live = ~term
    assert (obs[np.arange(n), 0, act].sum(axis=1) == 0).all()  # every stored action was legal
    # a non-final transition spans the body's move and the opponent's reply, seen from the body's side
    assert (nxt[live][..., 0].sum(axis=(1, 2)) - obs[live][..., 0].sum(axis=(1, 2)) == 1).all()
    assert (nxt[live][..., 1].sum(axis=(1, 2)) - obs[live][..., 1].sum(axis=(1, 2)) == 1).all()
    assert (rew[live] == 0).all() and set(np.unique(rew[term])) <= {-1.0, 0.0, 1.0} and (rew[term] == -1).any()
    assert mem.next_mask[:n][live].any(axis=1).all()


def test_ppo_keeps_each_bodys_decision_until_its_transition_completes() -> None:
    raw = selfplay("PPO", frames=10**6)
    raw["agent"][0]["memory"]["n_steps"] = 40
    spec = validate(raw, "t")
    space = AEBSpace.build(spec, 0)
    try:
        space.env_space.reset(0)
        agent = space.agent_space.agents[0]
        (link,) = space.agent_space.links
        env = link.env
        for _ in range(39):
            p = env.parity
            link.action[...] = agent.act(0, link.obs[p], mask=link.mask[p], acting=link.acting[p])
            env.step()
            agent.update(0, link.transitions[p])
        mem = agent.memories[0]
        valid = mem.valid[:39]
        assert valid.sum() > 30 and (valid.sum(axis=1) <= 2).all()
        obs = torch.as_tensor(mem.obs[:39][valid], dtype=torch.float32)
        acts = torch.as_tensor(mem.actions[:39][valid])
        masks = torch.as_tensor(mem.masks[:39][valid])
        with torch.no_grad():
            logp, _, v = agent.policy.evaluate(obs, acts, 0, False, masks)
        np.testing.assert_allclose(logp.numpy(), mem.logps[:39][valid], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(v.numpy(), mem.values[:39][valid], rtol=1e-4, atol=1e-5)
        assert masks.gather(1, acts.long()[:, None]).all()
    finally:
        space.close()


def test_gae_and_returns_skip_steps_without_a_transition() -> None:
    rewards = np.array([[0.0], [5.0], [1.0], [7.0]], np.float32)
    values = np.array([[0.5], [9.0], [0.25], [9.0]], np.float32)
    dones = np.array([[False], [True], [False], [True]])
    valid = np.array([[True], [False], [True], [False]])
    last = np.array([2.0], np.float32)
    gamma, lam = 0.9, 0.8
    adv, ret = gae(rewards, values, dones, last, gamma, lam, valid)
    a2 = 1.0 + gamma * 2.0 - 0.25
    a0 = 0.0 + gamma * 0.25 - 0.5 + gamma * lam * a2
    assert adv[2, 0] == pytest.approx(a2) and adv[0, 0] == pytest.approx(a0)
    np.testing.assert_allclose(ret[valid], (adv + values)[valid])
    rets = nstep_returns(rewards, dones, last, gamma, valid)
    assert rets[2, 0] == pytest.approx(1.0 + gamma * 2.0) and rets[0, 0] == pytest.approx(gamma * rets[2, 0])
    plain, _ = gae(rewards, values, dones, last, gamma, lam)
    np.testing.assert_allclose(plain, gae(rewards, values, dones, last, gamma, lam, np.ones_like(valid))[0])
