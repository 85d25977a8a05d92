"""What a new user's spec gets wrong, caught at `check` in one line; and dev/test modes that never lengthen a budget."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
import torch

from slm_lab_like.remote import JudgeServer
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.load import TEST_FRAMES, read_file, validate, with_mode


def cartpole(env: dict[str, Any] | None = None, net: dict[str, Any] | None = None) -> dict[str, Any]:
    agent: dict[str, Any] = {"algorithm": {"name": "PPO"}}
    if net is not None:
        agent["net"] = net
    return {"agent": [agent], "env": [{"name": "CartPole-v1", "max_frame": 300, **(env or {})}]}


def test_a_spec_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "binary.json"
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(SpecError) as err:
        read_file(path)
    assert "not UTF-8 text" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: net.gpu is honoured")
def test_gpu_without_cuda_is_refused_at_check() -> None:
    with pytest.raises(SpecError) as err:
        validate(cartpole(net={"name": "MLP", "gpu": True}), "gpu")
    assert err.value.path == "agent[0].net.gpu" and "no CUDA device" in err.value.message


@pytest.mark.parametrize("mode", ["dev", "test"])
def test_dev_and_test_modes_cap_an_episode_budget_and_never_lengthen_it(mode: str) -> None:
    spec = with_mode(validate(cartpole({"max_frame": None, "max_episode": 5}), "episodes"), mode)
    assert spec.env[0].max_episode == 5
    assert spec.env[0].max_frame is not None and spec.env[0].max_frame <= 20_000
    short = with_mode(validate(cartpole({"max_frame": 50}), "frames"), "test")
    assert short.env[0].max_frame == 50 and TEST_FRAMES > 50


def test_both_budgets_end_at_whichever_comes_first() -> None:
    from slm_lab_like.experiment.session import Session

    episodes = Session(validate(cartpole({"max_frame": 100_000, "max_episode": 3}), "episodes_first"), seed=0).run()
    assert episodes.env_episodes == [3] and episodes.env_frames[0] < 100_000
    frames = Session(validate(cartpole({"max_frame": 40, "max_episode": 1000}), "frames_first"), seed=0).run()
    assert frames.env_frames == [40] and frames.env_episodes[0] < 1000


@pytest.fixture()
def cartpole_judge() -> Iterator[str]:
    judge = JudgeServer("CartPole-v1", "tcp://127.0.0.1:0")
    address = judge.start()
    try:
        yield address
    finally:
        judge.stop()


def test_a_remote_entry_must_name_the_env_its_judge_hosts(cartpole_judge: str) -> None:
    raw = {"agent": [{"algorithm": {"name": "Random"}}],
           "env": [{"name": "Acrobot-v1", "remote": cartpole_judge, "max_frame": 100}]}
    with pytest.raises(SpecError) as err:
        validate(raw, "wrong_name")
    assert err.value.path == "env[0].name" and 'hosts "CartPole-v1", not "Acrobot-v1"' in err.value.message
    raw["env"][0]["name"] = "CartPole-v1"
    validate(raw, "right_name")


def test_kwargs_for_a_judges_env_are_refused(cartpole_judge: str) -> None:
    raw = {"agent": [{"algorithm": {"name": "Random"}}],
           "env": [{"name": "CartPole-v1", "remote": cartpole_judge, "max_frame": 100,
                    "kwargs": {"sutton_barto_reward": True}}]}
    with pytest.raises(SpecError) as err:
        validate(raw, "kwargs")
    assert err.value.path == "env[0].kwargs" and "makes its env itself" in err.value.message


class NoSeed:
    """A scripted player a user wrote without the seed keyword the lab makes players with."""

    def __call__(self, obs: Any) -> int:
        return 0


class Seeded(NoSeed):
    def __init__(self, seed: int) -> None:
        self.seed = seed


@pytest.mark.parametrize("path, words", [
    ("tests.test_spec_user_errors:NoSeed", "cannot be made as NoSeed(seed=...): TypeError"),
    ("os:path", "cannot be made as path(seed=...): TypeError: 'module' object is not callable"),
    ("collections:Counter", "Counter(seed=...) made a Counter, which cannot be called"),
])
def test_a_scripted_player_that_cannot_be_made_or_called_is_refused(path: str, words: str) -> None:
    from slm_lab_like.agents.scripted import load_policy
    from slm_lab_like.agents.selfplay import OpponentPoolConfig, pool_problem

    with pytest.raises(ValueError) as err:
        load_policy(path)
    assert words in str(err.value)
    assert pool_problem(OpponentPoolConfig(scripted=[path], scripted_prob=0.2)) == ("scripted[0]", str(err.value))
    assert load_policy("tests.test_spec_user_errors:Seeded") is Seeded
