"""The centralized critic (`algorithm.critic: "central"`): the critic input's layout, the joint observation read as
the env's own buffer through DataSpace.by_env, values and team rewards, parameter sharing and several agents of
one team, one-line spec errors where an env cannot be one team, checkpoints."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")

from slm_lab_like.agents.checkpoint import load_agent, save_agent  # noqa: E402
from slm_lab_like.agents.critic import (Team, TeamEnv, TeamView, body_ids, central_problem, critic_input,  # noqa: E402
                                        team_problem)
from slm_lab_like.aeb.space import AEBSpace, GroupLink, TeamGroupLink  # noqa: E402
from slm_lab_like.spec.errors import SpecError  # noqa: E402
from slm_lab_like.spec.load import validate  # noqa: E402
from tests.helpers import train  # noqa: E402

OBS = 4 + 2 * 3 + 2 * 2  # spread with 3 agents and 3 landmarks


def spread(critic: str = "central", agents: int = 1, frames: int = 600, algo: str = "PPO",
           **env: Any) -> dict[str, Any]:
    """A spread spec: `agents` agents sharing the 3 bodies (3 // agents each)."""
    algorithm = {"name": algo, "critic": critic}
    if algo == "PPO":
        algorithm.update(n_epochs=2, minibatch_size=30)
    entry = {"agent": [{"name": f"a{i}", "algorithm": dict(algorithm), "memory": {"name": "OnPolicyBatch", "n_steps": 20},
                        "net": {"name": "MLP", "hid_layers": [16]}} for i in range(agents)],
             "env": [{"name": "spread", "max_frame": frames, **env}],
             "body": {"product": "outer", "num": 3 // agents}, "meta": {"log_frequency": 10**9}}
    return entry


def built(raw: dict[str, Any], seed: int = 0) -> AEBSpace:
    space = AEBSpace.build(validate(raw, "t"), seed)
    space.env_space.reset(seed)
    return space


def step(space: AEBSpace, parity: int) -> None:
    """One loop step as the session takes it."""
    for ln in space.agent_space.links:
        ln.act(parity)
    for env in space.env_space.envs:
        env.step()
    for ln in space.agent_space.links:
        ln.update(parity)


# --------------------------------------------------------------------------- the critic's input layout


def team(lo: int, hi: int, sizes: tuple[int, ...] = (3,), widths: tuple[int, ...] = (2,)) -> Team:
    """A Team without views: `sizes[b]` bodies seeing Box(widths[b]) in each block; the group holds [lo, hi)."""
    spaces = tuple(gym.spaces.Box(0, 1, (d,)) for d in widths)
    return Team("g", lo, hi, spaces, sizes, (None, None))  # type: ignore[arg-type]


def test_critic_input_is_the_joint_obs_in_slot_order_then_the_body_id() -> None:
    joint = torch.arange(2 * 3 * 2, dtype=torch.float32).reshape(2, 6)  # T=2 steps, n=3 bodies, d=2
    t = team(1, 3)  # a group holding slots 1 and 2 of the env
    x = critic_input(joint, t)
    assert x.shape == (2 * 2, 3 * 2 + 3) and t.input_space("all").shape == (9,)
    for s in range(2):
        for j, slot in enumerate((1, 2)):
            row = x[s * 2 + j]
            np.testing.assert_array_equal(row[:6], joint[s])  # obs of slot 0, slot 1, slot 2
            np.testing.assert_array_equal(row[6:], np.eye(3)[slot])
    own = critic_input(joint, t, "all_own")
    assert own.shape == (4, 6 + 2 + 3) and t.input_space("all_own").shape == (11,)
    for s in range(2):
        for j, slot in enumerate((1, 2)):
            np.testing.assert_array_equal(own[s * 2 + j, :6], joint[s])
            np.testing.assert_array_equal(own[s * 2 + j, 6:8], joint[s, 2 * slot:2 * slot + 2])  # the body's own
            np.testing.assert_array_equal(own[s * 2 + j, 8:], np.eye(3)[slot])


def test_a_team_of_bodies_that_see_different_spaces_is_laid_out_block_by_block() -> None:
    """A speaker (3 wide) and two listeners (2 wide each): the joint obs is 3 + 2 + 2 wide; the listeners' group
    (slots 1-2) reads its own columns from the second block; pooling is per block, so its width keeps no team size."""
    joint = torch.arange(7, dtype=torch.float32).reshape(1, 7)
    listeners = team(1, 3, sizes=(1, 2), widths=(3, 2))
    assert listeners.observation_space.shape == (2,) and listeners.own_columns == (3, 2)
    own = critic_input(joint, listeners, "all_own")
    np.testing.assert_array_equal(own[:, 7:9], [[3, 4], [5, 6]])
    np.testing.assert_array_equal(own[:, 9:], np.eye(3)[1:3])
    pooled = critic_input(joint, listeners, "pooled")
    assert pooled.shape == (2, 2 + 2 * 3 + 2 * 2) == (2, listeners.input_width("pooled"))
    for j, mine in enumerate(([3, 4], [5, 6])):
        np.testing.assert_array_equal(pooled[j], mine + [0, 1, 2, 0, 1, 2] + [4, 5, 5, 6])  # own | spk mean, max | lst
    bigger = team(1, 5, sizes=(1, 4), widths=(3, 2))  # twice the listeners: the same pooled width
    assert bigger.input_width("pooled") == listeners.input_width("pooled")


@pytest.mark.parametrize("mode", ["pooled"])
def test_a_pooled_input_does_not_depend_on_the_order_of_teammates(mode: str) -> None:
    joint = torch.randn(5, 4 * 3)
    a = critic_input(joint, team(0, 1, sizes=(4,), widths=(3,)), mode)
    swapped = joint.reshape(5, 4, 3)[:, [0, 3, 1, 2]].reshape(5, 12)  # teammates of body 0 reordered
    torch.testing.assert_close(a, critic_input(swapped, team(0, 1, sizes=(4,), widths=(3,)), mode))


def test_team_reward_is_the_mean_over_rows_that_hold_a_transition() -> None:
    z = (np.zeros((3, 2), np.float32),)
    reward = (np.array([1.0, 2.0, 6.0], np.float32),)
    flags = (np.zeros(3, bool),)
    assert TeamView(z, z, z, reward, flags, flags).team_reward() == pytest.approx(3.0)
    done = (np.array([True, False, True]),)
    assert TeamView(z, z, z, reward, flags, flags, done).team_reward() == pytest.approx(3.5)
    assert TeamView(z, z, z, reward, flags, flags, (np.zeros(3, bool),)).team_reward() == 0.0
    two = (np.array([1.0], np.float32), np.array([2.0, 6.0], np.float32))  # two blocks: the mean of all 3 bodies
    assert TeamView(z, z, z, two, flags, flags).team_reward() == pytest.approx(3.0)
    final = (np.ones((3, 2), np.float32),)
    boot = TeamView(z, (z[0] + 2,), final, reward, (np.array([False, True, False]),), flags).bootstrap_obs()
    np.testing.assert_array_equal(boot[0], [[2, 2], [1, 1], [2, 2]])


# --------------------------------------------------------------------------- the joint observation is by_env's array


def test_by_env_is_one_zero_copy_array_per_env_and_parity_and_the_learner_reads_it() -> None:
    space = built(spread())
    try:
        env = space.env_space.envs[0]
        data = space.data
        view = data.by_env(0, "obs")
        assert view is data.by_env(0, "obs", env.parity)  # made once, no dict per step
        assert view.array is env.blocks[0].obs[env.parity]  # the env's buffer itself
        assert list(view) == [(0, 0, 0), (0, 0, 1), (0, 0, 2)]
        np.testing.assert_array_equal(view[(0, 0, 2)], env.blocks[0].obs[env.parity][2])
        (link,) = space.agent_space.links
        assert isinstance(link, TeamGroupLink)
        agent = space.agent_space.agents[0]
        team = agent.team.teams[0]
        for p in (0, 1):
            assert team.views[p].obs[0] is data.by_env(0, "obs", p).array
            assert team.views[p].next_obs[0] is data.by_env(0, "obs", 1 - p).array
            assert team.views[p].reward[0] is data.by_env(0, "reward").array
        assert (team.size, team.lo, team.hi) == (3, 0, 3)
    finally:
        space.close()


def test_agents_without_the_option_get_plain_links() -> None:
    space = built(spread(critic="own"))
    try:
        (link,) = space.agent_space.links
        assert type(link) is GroupLink and space.agent_space.agents[0].team is None
    finally:
        space.close()


def test_values_are_the_critic_on_the_joint_obs_with_each_bodys_id() -> None:
    space = built(spread())
    try:
        agent = space.agent_space.agents[0]
        env = space.env_space.envs[0]
        joint = env.blocks[0].obs[0].copy()
        step(space, 0)
        mem = agent.memories[0]
        np.testing.assert_array_equal(agent.team.joint[0][0], joint.reshape(-1))  # the step's joint obs, kept once
        x = torch.cat([torch.as_tensor(joint).reshape(1, -1).expand(3, -1), torch.eye(3)], dim=1)
        with torch.no_grad():
            v = agent.policy.critic(x, 0)[0].squeeze(-1).numpy()
        np.testing.assert_allclose(mem.values[0], v, rtol=1e-5, atol=1e-6)
        assert len(set(np.round(v, 6))) == 3  # the body id gives each body sharing the net its own value
        assert mem.rewards[0] == pytest.approx([env.blocks[0].reward.mean()] * 3)
    finally:
        space.close()


def test_several_agents_of_one_team_each_see_the_whole_env() -> None:
    space = built(spread(agents=3))
    try:
        env = space.env_space.envs[0]
        joint = env.blocks[0].obs[0].copy()
        step(space, 0)
        for a, agent in enumerate(space.agent_space.agents):
            team = agent.team.teams[0]
            assert (team.size, team.lo, team.hi) == (3, a, a + 1)
            np.testing.assert_array_equal(body_ids(team), np.eye(3)[a:a + 1])
            assert agent.policy.critic.body[0].in_features == 3 * OBS + 3
            x = torch.cat([torch.as_tensor(joint).reshape(1, -1), torch.eye(3)[a:a + 1]], dim=1)
            with torch.no_grad():
                v = agent.policy.critic(x, 0)[0].squeeze(-1).numpy()
            np.testing.assert_allclose(agent.memories[0].values[0], v, rtol=1e-5, atol=1e-6)
            assert agent.policy.actor.body[0].in_features == OBS  # actors see their own body only
    finally:
        space.close()


def test_rollout_critic_rows_line_up_with_the_bodies_rows() -> None:
    space = built(spread())
    try:
        agent = space.agent_space.agents[0]
        env = space.env_space.envs[0]
        seen = []
        captured = {}
        learn = agent.learn
        agent.learn = lambda rollouts: captured.setdefault("r", rollouts) and learn(rollouts)  # type: ignore[method-assign]
        parity = 0
        for _ in range(21):  # the 21st update trains on the first 20 steps
            seen.append(env.blocks[0].obs[parity].copy())
            step(space, parity)
            parity ^= 1
        (r,) = captured["r"]
        assert r.critic_obs.shape == (20 * 3, 3 * OBS + 3)
        for t in (0, 7, 19):
            for j in range(3):
                row = r.critic_obs[t * 3 + j].numpy()
                np.testing.assert_array_equal(row[:3 * OBS], seen[t].reshape(-1))
                np.testing.assert_array_equal(row[3 * OBS:], np.eye(3)[j])
                np.testing.assert_array_equal(r.obs[t * 3 + j].numpy(), seen[t][j])
    finally:
        space.close()


def test_the_critic_sees_every_teammate_that_an_actor_cannot() -> None:
    """Spread with `sight` hides far teammates from each body's observation; the central critic's input still
    holds every body's own position (slot i's block), then the agent ids the env appends, then the body id."""
    space = built(spread(kwargs={"n_agents": 3, "sight": 1e-3, "agent_id": True}))
    try:
        agent = space.agent_space.agents[0]
        obs = space.env_space.envs[0].blocks[0].obs[0].copy()  # (3, d): vel, pos, 3 landmarks, 2 teammates, id
        d = OBS + 3
        assert obs.shape == (3, d) and not obs[:, 10:14].any()  # no actor sees a teammate
        x = agent.team.input(0, obs.reshape(1, -1)).numpy()
        assert x.shape == (3, 3 * d + 3)
        for j in range(3):
            for i in range(3):
                np.testing.assert_array_equal(x[j, i * d + 2:i * d + 4], obs[i, 2:4])  # body i's position
                np.testing.assert_array_equal(x[j, i * d + 14:i * d + 17], np.eye(3)[i])  # the env's agent id
            np.testing.assert_array_equal(x[j, 3 * d:], np.eye(3)[j])  # the body id of the critic's row
        assert len({tuple(obs[i, 2:4]) for i in range(3)}) == 3
    finally:
        space.close()


# --------------------------------------------------------------------------- runs, checkpoints


@pytest.mark.parametrize("algo, agents", [("PPO", 1), ("PPO", 3), ("A2C", 1)])
def test_sessions_learn_with_a_central_critic(algo: str, agents: int) -> None:
    space, result = train(spread(agents=agents, frames=900, algo=algo))
    assert all(a.opt_step > 0 for a in space.agent_space.agents)
    assert all(torch.isfinite(p).all() for a in space.agent_space.agents for p in a.policy.parameters())
    assert sum(len(m.rows) for m in result.metrics.values()) == 3 * 900 // 3 // 25


def test_a_game_where_bodies_drop_out_runs_with_a_central_critic() -> None:
    raw = {"agent": [{"name": "team", "algorithm": {"name": "PPO", "critic": "central", "n_epochs": 1},
                      "memory": {"name": "OnPolicyBatch", "n_steps": 16}}],
           "env": [{"name": "tag_arena", "max_frame": 800, "max_t": 30, "kwargs": {"size": 4}}],
           "body": {"product": "outer", "num": 4}, "meta": {"log_frequency": 10**9}}
    space, _ = train(raw)
    assert space.agent_space.agents[0].opt_step > 0


def test_checkpoint_keeps_the_central_critic_and_its_normaliser(tmp_path) -> None:
    raw = spread(frames=300)
    raw["agent"][0]["algorithm"]["normalize_obs"] = True
    space, _ = train(raw)
    agent = space.agent_space.agents[0]
    save_agent(agent, tmp_path / "a.pt")
    fresh = AEBSpace.build(validate(raw, "t"), seed=5)
    try:
        other = fresh.agent_space.agents[0]
        load_agent(other, tmp_path / "a.pt")
        for (name, p), q in zip(agent.policy.state_dict().items(), other.policy.state_dict().values()):
            assert torch.equal(p, q), name
        assert any(k.startswith("critic.") for k in agent.policy.state_dict())
        np.testing.assert_array_equal(agent.team.norms[0][0].rms.mean, other.team.norms[0][0].rms.mean)
        assert agent.team.norms[0][0].rms.count > 1
    finally:
        fresh.close()


# --------------------------------------------------------------------------- where an env cannot be one team


def test_single_agent_env_is_a_one_line_error_at_the_critic_key() -> None:
    raw = {"agent": [{"name": "x", "algorithm": {"name": "PPO", "critic": "central"}}],
           "env": [{"name": "CartPole-v1", "max_frame": 100}], "body": {"product": "outer", "num": 2}}
    with pytest.raises(SpecError, match=r'^agent\[0\]\.algorithm\.critic: critic "central" needs a multi-agent env '
                                        r'whose bodies share one world; "CartPole-v1" is not one'):
        validate(raw, "t")  # refused by check, before anything is built


def speaker_listener(mode: str = "all", frames: int = 200) -> dict[str, Any]:
    """mpe2's speaker and listener, one PPO agent each, both with a central critic over the pair."""
    algorithm = {"name": "PPO", "critic": "central", "critic_input": mode, "n_epochs": 2, "minibatch_size": 10}
    return {"agent": [{"name": role, "algorithm": dict(algorithm), "memory": {"name": "OnPolicyBatch", "n_steps": 20},
                       "net": {"name": "MLP", "hid_layers": [16]}} for role in ("speaker", "listener")],
            "env": [{"name": "mpe2.simple_speaker_listener_v4:parallel_env", "max_frame": frames}],
            "body": {"product": "outer", "num": 1}, "meta": {"log_frequency": 10**9}}


@pytest.mark.parametrize("mode", ["all", "all_own", "pooled"])
def test_bodies_that_see_different_spaces_are_one_team(mode: str) -> None:
    """The speaker sees 3 numbers and the listener 11: each agent's critic reads the pair's joint observation
    (3 + 11, slot order) as its critic_input lays it out, and values are that critic's outputs."""
    pytest.importorskip("mpe2")
    space = built(speaker_listener(mode))
    try:
        env = space.env_space.envs[0]
        joint = np.concatenate([b.obs[0].reshape(-1) for b in env.blocks])
        assert joint.shape == (14,)
        step(space, 0)
        for a, agent in enumerate(space.agent_space.agents):
            t = agent.team.teams[0]
            assert (t.size, t.lo, t.hi, t.observation_space.shape) == (2, a, a + 1, ((3,), (11,))[a])
            np.testing.assert_array_equal(agent.team.joint[0][0], joint)
            own = joint[:3] if a == 0 else joint[3:]
            x = {"all": np.concatenate([joint, np.eye(2)[a]]), "all_own": np.concatenate([joint, own, np.eye(2)[a]]),
                 "pooled": np.concatenate([own, joint[:3], joint[:3], joint[3:], joint[3:]])}[mode]
            assert agent.policy.critic.body[0].in_features == len(x)
            with torch.no_grad():
                v = agent.policy.critic(torch.as_tensor(x, dtype=torch.float32)[None], 0)[0].squeeze(-1).numpy()
            np.testing.assert_allclose(agent.memories[0].values[0], v, rtol=1e-5, atol=1e-6)
    finally:
        space.close()
    if mode == "pooled":  # a session trains each agent over the pair (the layouts differ only in the columns above)
        trained, _ = train(speaker_listener(mode, frames=300))
        assert all(a.opt_step > 0 for a in trained.agent_space.agents)


@pytest.mark.parametrize("key, value, what", [("critic_input", "pooled", "input"), ("critic_team", "agent", "team")])
def test_a_central_critics_option_without_a_central_critic_is_a_one_line_error(key: str, value: str,
                                                                              what: str) -> None:
    raw = spread(critic="own")
    raw["agent"][0]["algorithm"][key] = value
    with pytest.raises(SpecError, match=rf'^agent\[0\]\.algorithm\.{key}: "{value}" is the {what} of a central '
                                        r'critic; set critic "central"'):
        validate(raw, "t")
    raw["agent"][0]["algorithm"][key] = "everything"
    with pytest.raises(SpecError, match=rf"^agent\[0\]\.algorithm\.{key}: "):
        validate(raw, "t")


def test_turn_based_games_are_a_one_line_error() -> None:
    raw = {"agent": [{"name": "x", "algorithm": {"name": "PPO", "critic": "central"}}],
           "env": [{"name": "connect_four", "max_frame": 100}], "body": {"product": "outer", "num": 2}}
    with pytest.raises(SpecError, match=r'^agent\[0\]\.algorithm\.critic: critic "central" needs an env whose bodies '
                                        r'move simultaneously; "connect_four" is turn-based'):
        validate(raw, "t")


def test_bad_critic_values_and_algorithms_without_the_option_are_spec_errors() -> None:
    raw = spread()
    raw["agent"][0]["algorithm"]["critic"] = "centre"
    with pytest.raises(SpecError, match=r"^agent\[0\]\.algorithm\.critic: "):
        validate(raw, "t")
    raw = spread(algo="DQN")
    raw["agent"][0].pop("memory")
    with pytest.raises(SpecError, match=r"^agent\[0\]\.algorithm\.critic: "):
        validate(raw, "t")


def test_team_and_central_problem_lines() -> None:
    box = gym.spaces.Box(0, 1, (3,))
    assert team_problem(TeamEnv("spread", True, False, [box, box])) is None
    assert "separate copies" in team_problem(TeamEnv("CartPole-v1", False, False, [box]))
    assert "turn-based" in team_problem(TeamEnv("connect_four", True, True, [box]))
    assert "Box observations" in team_problem(TeamEnv("g", True, False, [gym.spaces.Discrete(3)]))
    central, own = validate(spread(), "t").agent[0].algorithm.config, validate(spread("own"), "t").agent[0].algorithm.config
    assert central_problem(own, [TeamEnv("CartPole-v1", False, False, [box])]) is None
    good = TeamEnv("spread", True, False, [box])
    assert central_problem(central, [good, good]) is None
    assert central_problem(central, [good, TeamEnv("g", True, False, [box, gym.spaces.Box(0, 1, (4,))])]) is None
    key, line = central_problem(central, [good, TeamEnv("g", True, False, [box, gym.spaces.Discrete(4)])])
    assert key == "critic" and line.startswith('critic "central" needs Box observations; env "g"')


@pytest.mark.parametrize("critic_team", ["env", "agent"])
def test_a_side_of_a_mixed_game_learns_its_own_reward_with_critic_team_agent(critic_team: str) -> None:
    """mpe2's simple_adversary: the adversary and the two good agents are rewarded against each other. With
    critic_team "env" every critic learns the mean over all three bodies (the sides' rewards mixed); with "agent"
    each side's critic learns its own bodies' mean, while it still sees the whole joint observation."""
    pytest.importorskip("mpe2")
    algorithm = {"name": "PPO", "critic": "central", "critic_team": critic_team, "n_epochs": 2, "minibatch_size": 10}
    raw = {"agent": [{"name": side, "algorithm": dict(algorithm), "memory": {"name": "OnPolicyBatch", "n_steps": 20},
                      "net": {"name": "MLP", "hid_layers": [16]}} for side in ("adversary", "good")],
           "env": [{"name": "mpe2.simple_adversary_v3:parallel_env", "max_frame": 200}],
           "body": {"product": "custom", "coords": [[0, 0, 0], [1, 0, 0], [1, 0, 1]]}, "meta": {"log_frequency": 10**9}}
    space = built(raw)
    try:
        for parity in (0, 1, 0):
            step(space, parity)
        env = space.env_space.envs[0]
        adversary, good = space.agent_space.agents
        assert adversary.team.teams[0].size == good.team.teams[0].size == 3  # both see the whole game
        got_adv, got_good = adversary.memories[0].rewards[:3, 0], good.memories[0].rewards[:3, 0]
        assert np.all(got_good == good.memories[0].rewards[:3, 1])  # one value per step for the side's bodies
        last = np.concatenate([b.reward for b in env.blocks])  # the third step's rewards, in slot order
        if critic_team == "agent":
            assert got_adv[2] == pytest.approx(last[0]) and got_good[2] == pytest.approx(last[1:].mean())
            assert not np.allclose(got_adv, got_good)
        else:
            assert got_adv[2] == pytest.approx(last.mean()) == pytest.approx(got_good[2])
    finally:
        space.close()

