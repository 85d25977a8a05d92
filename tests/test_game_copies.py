"""Many games of a PettingZoo env in one env entry: an entry with a whole multiple of the game's players as bodies
hosts that many copies, each copy's bodies mapped as one game's, their buffers views of the lab's, their episodes
counted under the lab's slot numbers."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from slm_lab_like.envs.base import Clock  # noqa: E402
from slm_lab_like.envs.copies import GameCopies  # noqa: E402
from slm_lab_like.envs.registry import adapter_for  # noqa: E402
from slm_lab_like.spec.errors import SpecError  # noqa: E402
from slm_lab_like.spec.schema import EnvSpec  # noqa: E402
from tests.helpers import train  # noqa: E402

PZ_CONNECT_FOUR = "pettingzoo.classic.connect_four_v3:env"


def random_spec(env: str, bodies: int, frames: int, **entry: object) -> dict:
    return {"agent": [{"name": "random", "algorithm": {"name": "Random"}}],
            "env": [{"name": env, "max_frame": frames, **entry}], "body": {"product": "outer", "num": bodies},
            "meta": {"random_seed": 1, "log_frequency": 10**9}}


def test_copies_write_through_views_of_one_block_and_step_in_lockstep() -> None:
    env = adapter_for(EnvSpec(name="connect_four", max_frame=100)).build(8, Clock(max_frame=100))
    assert isinstance(env, GameCopies) and len(env.copies) == 4 and len(env.blocks) == 1
    block = env.blocks[0]
    assert (block.start, block.stop) == (0, 8)
    for c, copy in enumerate(env.copies):
        (sub,) = copy.blocks
        assert np.shares_memory(sub.obs[0], block.obs[0]) and np.shares_memory(sub.acting[1], block.acting[1])
        assert sub.obs[0].base is block.obs[0] and env.offsets[c] == 2 * c
    env.reset(seed=0)
    assert block.acting[env.parity].tolist() == [True, False] * 4  # every game's first player to move
    assert block.action_mask[env.parity][0].all() and not block.action_mask[env.parity][1].any()
    block.action[:] = 3
    env.step()
    assert block.acting[env.parity].tolist() == [False, True] * 4 and env.clock.frame == 4
    assert (block.obs[env.parity][1::2, 5, 3, 1] == 1).all()  # the second players see the first one's piece
    env.close()


@pytest.mark.parametrize("name", ["connect_four", PZ_CONNECT_FOUR])
def test_every_copy_plays_whole_games_counted_under_the_labs_slots(name: str) -> None:
    space, result = train(random_spec(name, bodies=6, frames=3000))
    env = space.env_space.envs[0]
    assert isinstance(env, GameCopies) and len(env.copies) == 3
    assert result.env_frames == [sum(env.slot_frames)] and result.env_frames[0] >= 3000
    for game in range(3):
        first, second = (result.metrics[(0, 0, 2 * game + s)].rows for s in (0, 1))
        assert len(first) == len(second) >= 20  # each seat of each copy ended every one of its games
        assert all(a["return"] + b["return"] == 0 and a["return"] in (-1, 0, 1) for a, b in zip(first, second))
    assert sum(result.env_episodes) == sum(len(m.rows) for m in result.metrics.values())


def test_bodies_that_are_not_whole_games_are_refused_as_before() -> None:
    with pytest.raises(SpecError) as err:
        train(random_spec(PZ_CONNECT_FOUR, bodies=3, frames=100))
    assert "every one is taken" in str(err.value) and "\n" not in str(err.value)


def test_a_self_play_spec_runs_on_pettingzoos_connect_four_with_search_and_snapshot_members() -> None:
    pool = {"size": 2, "refresh_frames": 300, "prob": 0.3, "random_prob": 0.1, "scripted_prob": 0.3,
            "scripted": [{"policy": "slm_lab_like.envs.mcts:MCTSPlayer", "kwargs": {"simulations": 8}}],
            "sampling": "pfsp", "game_seats": 2}
    raw = {"agent": [{"name": "learner", "algorithm": {"name": "PPO", "n_epochs": 1, "minibatch_size": 64},
                      "memory": {"name": "OnPolicyBatch", "n_steps": 8},
                      "net": {"name": "ConvNet", "channels": [8], "kernels": [3], "strides": [1], "hid_layers": [16]},
                      "opponent_pool": pool}],
           "env": [{"name": PZ_CONNECT_FOUR, "max_frame": 1200}], "body": {"product": "outer", "num": 8},
           "meta": {"random_seed": 1, "log_frequency": 10**9}}
    space, result = train(raw)
    (agent,) = space.agent_space.agents
    assert agent.snapshots_taken >= 2 and sum(m.games for m in agent.members) > 5
    assert agent.learner.frame > 0 and sum(len(m.rows) for m in result.metrics.values()) > 20


def test_the_search_league_spec_runs_unchanged_on_pettingzoos_connect_four_in_test_mode() -> None:
    """The recipe is a spec, not code for one game: only the env's name changes (issue 28, part 5)."""
    from slm_lab_like.experiment.trial import run_trial
    from slm_lab_like.spec.load import pick, validate, with_mode

    raw, name = pick("spec/league_connect_four_search.json")
    raw["env"][0]["name"] = PZ_CONNECT_FOUR
    result = run_trial(with_mode(validate(raw, name), "test"), None, "test")
    (session,) = result.sessions
    assert session.env_frames[0] > 0 and session.env_names == [PZ_CONNECT_FOUR]
