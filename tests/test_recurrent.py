"""Recurrent nets (net "Recurrent": GRU or LSTM) for PPO, A2C and REINFORCE: a state per body, forgotten at its
episode's end, advanced only on its own turns, stored with each step so that training unrolls the rollout's sequences
from the states the bodies acted from; refused by `check` where an algorithm cannot carry it."""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from slm_lab_like.agents.a2c import A2C
from slm_lab_like.agents.net.recurrent import Recurrent, RecurrentConfig, Seq
from slm_lab_like.agents.onpolicy import OnPolicyAlgorithm, Rollout
from slm_lab_like.agents.ppo import PPO
from slm_lab_like.agents.reinforce import REINFORCE
from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.load import validate
from tests.helpers import first_legal_opponent

POSITION_ONLY = "slm_lab_like.envs.partial:CartPolePositionOnly-v1"


def spec(algorithm: str = "PPO", cell: str = "GRU", env: str = POSITION_ONLY, bodies: int = 4, frames: int = 600,
         seq_len: int | None = 7, **algo: Any) -> dict[str, Any]:
    net = {"name": "Recurrent", "cell": cell, "hid_layers": [16], "rnn_hidden": 8, "seq_len": seq_len}
    if algorithm == "PPO":
        algo = {"n_epochs": 2, "minibatch_size": 40, **algo}
    return {"agent": [{"name": "a", "algorithm": {"name": algorithm, **algo},
                       "memory": {"name": "OnPolicyBatch", "n_steps": 50}, "net": net}],
            "env": [{"name": env, "max_frame": frames}], "body": {"product": "outer", "num": bodies},
            "meta": {"max_session": 1, "random_seed": 1}}


@pytest.mark.parametrize("cell", ["GRU", "LSTM"])
@settings(max_examples=20, deadline=None)
@given(lengths=st.lists(st.integers(1, 6), min_size=1, max_size=5), seed=st.integers(0, 100))
def test_sequences_of_any_lengths_unroll_as_step_by_step_acting_does(cell: str, lengths: list[int], seed: int) -> None:
    torch.manual_seed(seed)
    net = Recurrent(RecurrentConfig(cell=cell, hid_layers=[5], rnn_hidden=4, rnn_layers=2), [(3,)], [[2, 1]])
    T, B = max(lengths), len(lengths)
    x = torch.randn(T, B, 3)
    state0 = torch.randn(B, net.state_size)
    heads, last = net.unroll(x, 0, Seq(state0, torch.tensor(lengths)))
    rows = []
    for b, n in enumerate(lengths):  # one body at a time, one step a call, as acting goes
        state = state0[b:b + 1]
        outs = []
        for t in range(n):
            out, state = net.unroll(x[t:t + 1, b:b + 1], 0, Seq(state))
            outs.append(out[0])
        rows.append(outs)
        torch.testing.assert_close(last[b:b + 1], state)
    step_major = [rows[b][t] for t in range(T) for b in range(B) if t < lengths[b]]
    torch.testing.assert_close(heads[0], torch.cat(step_major))


def run_checking_rollouts(raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch, turns: int = 0) -> list[Rollout]:
    """Run a spec; before each learning step, unroll its rollouts and check that every step's log-prob and value
    are the ones the body acted with (the stored states, the cuts at episode ends and turns all in place). With
    `turns` bodies taking turns, a body's first step of a rollout may be a move it chose before the last training step
    (its turn came round after it): only those rows, one a body and each the first of a sequence, may differ."""
    seen: list[Rollout] = []

    def checking(learn: Any) -> Any:
        def checked(self: OnPolicyAlgorithm, rollouts: list[Rollout]) -> None:
            with torch.no_grad():
                for r in rollouts:
                    logp, _, v = self.policy.evaluate(r.obs, r.actions, r.sig, False, r.masks, r.critic_obs, r.csig,
                                                      r.seq)
                    same = torch.isclose(logp, r.logps, atol=1e-4, rtol=1e-4)
                    if v is not None:
                        same &= torch.isclose(v, r.values, atol=1e-4, rtol=1e-4)
                    differ = torch.nonzero(~same).flatten()
                    if turns and seen:  # rows 0 .. sequences - 1 are the sequences' first steps
                        assert len(differ) <= turns and (differ < r.sequences).all(), differ
                    else:
                        assert len(differ) == 0, differ
                    seen.append(r)
            learn(self, rollouts)
        return checked

    for cls in (PPO, A2C, REINFORCE):
        monkeypatch.setattr(cls, "learn", checking(cls.learn))
    Session(validate(raw, "t"), seed=3).run()
    return seen


@pytest.mark.parametrize("algorithm,cell", [("PPO", "GRU"), ("PPO", "LSTM"), ("A2C", "GRU"), ("REINFORCE", "LSTM")])
def test_training_unrolls_each_step_from_the_state_it_acted_from(algorithm: str, cell: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    rollouts = run_checking_rollouts(spec(algorithm, cell, env="CartPole-v1", frames=1000), monkeypatch)
    assert len(rollouts) >= 4  # 1000 frames / (50 steps x 4 bodies), the last rollout not full
    seq = rollouts[0].seq
    assert seq is not None and seq.lengths is not None
    assert int(seq.lengths.max()) <= 7 and int(seq.lengths.sum()) == 200  # cut every 7 steps and at episode ends
    assert rollouts[0].sequences > 200 // 7 + 4  # early CartPole episodes end inside the rollout: more cuts


def test_a_turn_based_game_advances_a_bodys_state_on_its_own_turns_only(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = spec(env="connect_four", bodies=2, frames=1500, seq_len=None)
    rollouts = run_checking_rollouts(raw, monkeypatch, turns=2)
    assert rollouts and rollouts[0].masks is not None
    seq = rollouts[0].seq
    assert seq is not None and seq.lengths is not None
    assert int(seq.lengths.sum()) == len(rollouts[0].returns) < 100  # a body's own turns only, not all 2 x 50 rows


def test_a_native_vector_env_and_a_central_critic_unroll_as_they_acted(monkeypatch: pytest.MonkeyPatch) -> None:
    native = spec(env="CartPole-v1", frames=1200)
    native["env"][0]["vector"] = "native"  # NEXT_STEP autoreset: a reset step that is no one's step
    assert run_checking_rollouts(native, monkeypatch)
    central = spec(env="spread", bodies=3, frames=600, critic="central")
    rollouts = run_checking_rollouts(central, monkeypatch)
    assert rollouts and rollouts[0].critic_obs is not None and rollouts[0].critic_obs.dim() == 3


def test_states_are_forgotten_at_episode_end_and_kept_in_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    from slm_lab_like.aeb.space import AEBSpace

    space = AEBSpace.build(validate(spec(), "t"), 0)
    try:
        agent = space.agent_space.agents[0]
        assert isinstance(agent, OnPolicyAlgorithm)
        obs = np.full((4, 2), 0.5, np.float32)
        agent.act(0, obs)
        assert np.abs(agent.hidden[0]).sum() > 0 and not agent.fresh[0].any()
        agent.episodes_ended(0, np.array([True, False, True, False]))
        assert not agent.hidden[0][[0, 2]].any() and agent.hidden[0][[1, 3]].any()
        assert agent.fresh[0].tolist() == [True, False, True, False]
        state = copy.deepcopy(agent.state_dict())
        agent.act(0, obs)
        agent.load_state_dict(state)
        np.testing.assert_array_equal(agent.hidden[0], state["hidden"][0].numpy())
        acting = np.array([False, True, False, False])  # a turn-based step: only body 1 moves
        before = agent.hidden[0].copy()
        agent.act(0, obs, acting=acting)
        changed = (agent.hidden[0] != before).any(axis=1)
        assert changed.tolist() == [False, True, False, False]
    finally:
        space.close()


@pytest.mark.parametrize("algorithm,extra", [("DQN", {}), ("SAC", {}), ("SARSA", {})])
def test_check_refuses_a_recurrent_net_for_an_algorithm_that_cannot_carry_it(algorithm: str, extra: dict) -> None:
    raw = spec(algorithm, **extra)
    raw["agent"][0]["memory"] = {"name": "Replay"} if algorithm != "SARSA" else {"name": "OnPolicyBatch"}
    with pytest.raises(SpecError) as err:
        validate(raw, "t")
    assert err.value.path.endswith("net.name") and "PPO, A2C or REINFORCE" in err.value.message
    assert "\n" not in str(err.value)


def test_a_typo_in_a_recurrent_key_is_a_did_you_mean() -> None:
    raw = spec()
    raw["agent"][0]["net"]["rnn_hiden"] = 8
    with pytest.raises(SpecError) as err:
        validate(raw, "t")
    assert err.value.path.endswith("net.rnn_hiden") and "rnn_hidden" in err.value.message


def test_a_recurrent_agent_plays_connect_four_against_its_pool_and_is_evaluated_with_memory_reset() -> None:
    from slm_lab_like.aeb.space import AEBSpace
    from slm_lab_like.experiment.evaluate import play, split_quota

    raw = spec(env="connect_four_batch", bodies=8, frames=2000, seq_len=None)
    raw["agent"][0]["opponent_pool"] = {"size": 2, "refresh_frames": 800, "prob": 0.5, "random_prob": 0.5,
                                        "game_seats": 2}
    result = Session(validate(raw, "t"), seed=1).run()
    assert result.env_frames[0] >= 2000
    space = AEBSpace.build(validate(raw, "t"), 2)
    try:
        agent = space.agent_space.agents[0]
        agent.set_training(False)
        forgot: list[int] = []
        learner = agent.learner
        ended = learner.episodes_ended
        learner.episodes_ended = lambda g, rows: (forgot.append(int(rows.sum())), ended(g, rows))  # type: ignore
        ends = play(space, split_quota(space, 8), 2)
        assert sum(len(e) for e in ends.values()) == 8 and sum(forgot) >= 8
        assert learner.fresh[0].any() and not learner.hidden[0][learner.fresh[0]].any()
    finally:
        space.close()


def test_through_judges_a_spawned_env_and_a_seat_of_a_hosted_game(monkeypatch: pytest.MonkeyPatch) -> None:
    from slm_lab_like.remote import judge_for, serve, shutdown

    spawned = spec(frames=600)
    spawned["env"][0]["remote"] = "spawn"
    assert run_checking_rollouts(spawned, monkeypatch)
    address = serve("pettingzoo.classic.tictactoe_v3:env", multi=True, client_timeout=20.0)
    try:
        tokens = judge_for(address).tokens
        first, second = sorted(tokens)
        monkeypatch.setenv("SEAT_TOKEN", tokens[second])
        raw = spec(env="pettingzoo.classic.tictactoe_v3:env", bodies=1, seq_len=None)
        raw["env"][0].update(max_frame=10**6, max_episode=30, remote={"address": address, "token_env": "SEAT_TOKEN"})
        raw.pop("body")
        with first_legal_opponent(address, tokens[first]):
            result = Session(validate(raw, "seat"), seed=3).run()
        rows = [r for m in result.metrics.values() for r in m.rows]
        assert len(rows) >= 30 and all(r["t"] >= 2 for r in rows if r["return"] < 0)  # no illegal move
    finally:
        shutdown(address)


def test_a_checkpoint_player_keeps_its_state_through_a_game_and_forgets_it_at_the_next() -> None:
    from slm_lab_like.aeb.space import AEBSpace
    from slm_lab_like.experiment.players import AgentPolicy

    space = AEBSpace.build(validate(spec(env="connect_four", bodies=2), "t"), 0)
    try:
        agent = space.agent_space.agents[0]
        agent.set_training(False)
        player = AgentPolicy(agent)
        board = space.agent_space.agents[0].groups[0].observation_space.sample() * 0 + 1
        legal = np.ones(7, dtype=bool)
        player({"observation": board, "action_mask": legal})
        first = agent.hidden[0][0].copy()
        player({"observation": board, "action_mask": legal})
        assert first.any() and (agent.hidden[0][0] != first).any() and not agent.hidden[0][1:].any()
        player.new_game()
        assert not agent.hidden[0].any()
    finally:
        space.close()
