"""Env names as users write them: a gymnasium id, `module:EnvId` (gymnasium's form for an id a module registers
on import), `module:Class`; each resolved in one place (`envs.make.gym_id`), by specs and judges alike."""
from __future__ import annotations

import gymnasium as gym
import pytest

from slm_lab_like.envs.make import check_name, gym_id, make_gym, multiagent_api
from slm_lab_like.remote import RemoteEnv, serve, shutdown


def test_gym_id_reads_gymnasiums_module_colon_id_form() -> None:
    assert gym_id("CartPole-v1") == "CartPole-v1"
    assert gym_id("tests.space_envs:LabTestSpaces-v0") == "LabTestSpaces-v0"
    assert gym_id("tests.space_envs:SpaceEnv") is None  # an attribute of the module: a class path
    assert gym_id("tests.space_envs:NoSuchId-v0") is None and gym_id("no_such_module_xyz:Env-v0") is None
    assert check_name("tests.space_envs:LabTestSpaces-v0") is None
    assert multiagent_api("tests.space_envs:LabTestSpaces-v0") is None
    assert "module:EnvId when a module registers it" in str(check_name("SurelyUnregisteredThing-v0"))


def test_a_registered_id_is_made_with_its_registration() -> None:
    env = make_gym("tests.space_envs:LabTestSpaces-v0", None, obs="dict", act="box")
    assert isinstance(env.observation_space, gym.spaces.Dict) and env.spec is not None
    assert env.spec.max_episode_steps == 8  # the registration's limit, as gym.make gives it
    env.close()


@pytest.mark.timeout(60)
def test_a_judge_hosts_an_id_its_module_registers() -> None:
    address = serve("tests.space_envs:LabTestSpaces-v0", env_kwargs={"obs": "box"})
    try:
        env = RemoteEnv(address, timeout=5)
        assert env.reset(seed=0)[0].shape == (3,)
        env.close()
    finally:
        shutdown(address)


def test_an_unregistered_namespace_says_how_to_get_its_envs() -> None:
    assert check_name("ALE/Pong-v5") == (
        'unknown env "ALE/Pong-v5": namespace "ALE" is not registered; pip install ale-py and name it '
        '"ale_py:ALE/Pong-v5" (importing ale_py registers the Atari envs), or use envpool\'s "Pong-v5" with vector: '
        '"envpool"')
    assert check_name("SomeLab/Arena-v0") == ('unknown env "SomeLab/Arena-v0": namespace "SomeLab" is not registered; '
                                              'name the module that registers it before the id, as '
                                              '"module:SomeLab/Arena-v0"')
