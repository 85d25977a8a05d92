"""`check` never lies: what validation accepts runs, what it rejects is one line at the key path at fault."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

pytest.importorskip("pettingzoo")

from slm_lab_like.spec.errors import SpecError  # noqa: E402
from slm_lab_like.spec.load import validate  # noqa: E402
from tests.spec_grammar import specs, try_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def assert_honest(raw: dict[str, Any]) -> None:
    outcome, message = try_spec(raw)
    assert outcome != "dishonest", f"{message}\nspec: {json.dumps(raw)}"


# The default run draws the same 80 specs every time (derandomize, 4 s alone): fresh draws took 4 s in one default
# run and 34 s in another (300 fresh specs cost 32 s of CPU alone, from 0.01 to 3.2 s each), which the default run's
# 5 minutes cannot absorb. Fresh random specs, five times as many, are the long tier's.
@settings(max_examples=80, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(specs())
def test_what_check_accepts_runs_and_what_it_rejects_is_one_line(raw: dict[str, Any]) -> None:
    assert_honest(raw)


@pytest.mark.slow
@pytest.mark.long
@settings(max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(specs())
def test_check_stays_honest_over_fresh_random_specs(raw: dict[str, Any]) -> None:
    assert_honest(raw)


def one(agent: dict[str, Any], env: dict[str, Any], num: int = 1) -> dict[str, Any]:
    return {"agent": [agent], "env": [{"max_frame": 300, **env}], "body": {"num": num}, "meta": {"random_seed": 0}}


REJECTED = [
    ("dqn_on_pendulum", one({"algorithm": {"name": "DQN"}}, {"name": "Pendulum-v1"}),
     "agent[0].algorithm.name", "DQN takes Discrete actions"),
    ("dqn_on_mountaincar", one({"algorithm": {"name": "DoubleDQN"}}, {"name": "MountainCarContinuous-v0"}),
     "agent[0].algorithm.name", "for continuous actions"),
    ("onpolicy_memory_for_dqn", one({"algorithm": {"name": "DQN"}, "memory": {"name": "OnPolicyBatch"}},
                                    {"name": "CartPole-v1"}), "agent[0].memory.name", "OnPolicyBatch"),
    ("replay_for_ppo", one({"algorithm": {"name": "PPO"}, "memory": {"name": "Replay"}}, {"name": "CartPole-v1"}),
     "agent[0].memory.name", "PPO learns from OnPolicyBatch"),
    ("convnet_on_vectors", one({"algorithm": {"name": "PPO"}, "net": {"name": "ConvNet"}}, {"name": "CartPole-v1"}),
     "agent[0].net", "image observations"),
    ("mlp_over_two_spaces", {"agent": [{"algorithm": {"name": "PPO"}}],
                             "env": [{"name": "CartPole-v1", "max_frame": 100}, {"name": "Acrobot-v1", "max_frame": 100}]},
     "agent[0].net", "Hydra"),
    ("kwargs_not_taken", one({"algorithm": {"name": "Random"}}, {"name": "CartPole-v1", "kwargs": {"gravity": 3}}),
     "env[0].kwargs.gravity", "unexpected keyword argument 'gravity'"),
    ("pettingzoo_kwargs_not_taken", one({"algorithm": {"name": "PPO"}}, {"name": "pettingzoo.classic.tictactoe_v3:env",
                                                                          "kwargs": {"board_size": 4}}, num=2),
     "env[0].kwargs.board_size", "unexpected keyword argument 'board_size'"),
    ("class_not_an_env", one({"algorithm": {"name": "Random"}}, {"name": "collections:OrderedDict"}),
     "env[0].name", "not a gymnasium.Env"),
    ("function_not_an_env", one({"algorithm": {"name": "Random"}}, {"name": "json:dumps"}),
     "env[0].name", "cannot build env"),
    ("unflattenable_space", one({"algorithm": {"name": "Random"}}, {"name": "tests.space_envs:TextEnv"}),
     "env[0].name", "Text cannot be flattened"),
    ("native_without_an_implementation", one({"algorithm": {"name": "Random"}}, {"name": "Acrobot-v1",
                                                                                  "vector": "native"}),
     "env[0].vector", "no native vector implementation"),
    ("sac_in_a_masked_game", one({"algorithm": {"name": "SAC"}}, {"name": "connect_four"}, num=2),
     "agent[0].algorithm.name", "does not act within legal-action masks"),
    *[(f"broken_env_{fault}", one({"algorithm": {"name": "PPO"}}, {"name": "tests.space_envs:BrokenEnv",
                                                                    "kwargs": {"fault": fault}}),
       "env[0].name", words) for fault, words in (
        ("shape", "reset() returned an observation of shape (4,) that does not fit"),
        ("old_api", "step() returned a 4-tuple; a gymnasium env returns (observation, reward, terminated"),
        ("step_raises", "step(a sampled action) raised RuntimeError: the simulator lost its state"),
        ("reward", "step() returned a reward of type NoneType; expected a real number"),
        ("dict_key", "reset(seed=0) raised KeyError"))],
    *[(f"broken_pettingzoo_{fault}", one({"algorithm": {"name": "PPO"}}, {"name": "tests.broken_pettingzoo:parallel_env",
                                                                          "kwargs": {"fault": fault}}, num=2),
       "env[0].name", words) for fault, words in (
        ("shape", "reset(seed=0) raised ValueError: could not broadcast input array from shape (5,)"),
        ("step_raises", "the first step raised RuntimeError: the physics engine diverged"))],
    ("lr_below_zero", one({"algorithm": {"name": "PPO"}, "net": {"name": "MLP", "optim": {"lr": -1e-3}}},
                          {"name": "CartPole-v1"}), "agent[0].net.optim.lr", "expected a value >= 0.0, got -0.001"),
    ("lr_schedule_below_zero", one({"algorithm": {"name": "A2C"}, "net": {"name": "MLP", "optim": {
        "lr": {"name": "linear", "start": 1e-3, "end": -0.01}}}}, {"name": "CartPole-v1"}),
     "agent[0].net.optim.lr.end", "expected a value >= 0.0, got -0.01"),
    ("clip_schedule_below_zero", one({"algorithm": {"name": "PPO", "clip_eps": {"name": "linear", "start": 0.2,
                                                                                "end": -0.5}}}, {"name": "CartPole-v1"}),
     "agent[0].algorithm.clip_eps.end", "expected a value >= 0.0"),
    ("target_kl_below_zero", one({"algorithm": {"name": "PPO", "target_kl": -0.1}}, {"name": "CartPole-v1"}),
     "agent[0].algorithm.target_kl", "expected a value >= 0.0"),
    ("gamma_nan", one({"algorithm": {"name": "PPO", "gamma": float("nan")}}, {"name": "CartPole-v1"}),
     "agent[0].algorithm.gamma", "expected a number, got NaN"),
    ("epsilon_above_one", one({"algorithm": {"name": "DQN", "epsilon": {"name": "linear", "start": 2.0, "end": 0.1}}},
                              {"name": "CartPole-v1"}), "agent[0].algorithm.epsilon.start", "expected a value <= 1.0"),
    ("duplicate_agent_names", {"agent": [{"name": "x", "algorithm": {"name": "Random"}},
                                         {"name": "x", "algorithm": {"name": "Random"}}],
                               "env": [{"name": "connect_four", "max_frame": 100}]},
     "agent[1].name", '"x" names agent[0] already'),
    ("default_name_taken", {"agent": [{"name": "agent1", "algorithm": {"name": "Random"}},
                                      {"algorithm": {"name": "Random"}}],
                            "env": [{"name": "connect_four", "max_frame": 100}]},
     "agent[1].name", '"agent1" names agent[0] already'),
    ("never_learns", one({"algorithm": {"name": "DQN", "learning_starts": 5000}}, {"name": "CartPole-v1"}, num=2),
     "agent[0].algorithm.learning_starts", "5000 frames before learning, but the budgets of its envs end after 300"),
    ("opponent_pool_on_copies", one({"algorithm": {"name": "PPO"}, "opponent_pool": {"size": 2}}, {"name": "CartPole-v1"},
                                    num=2), "agent[0].opponent_pool", "needs a multi-agent game"),
    ("search_choice_of_algorithm", {**one({"algorithm": {"name": "PPO", "n_epochs": 2}}, {"name": "CartPole-v1"}),
                                    "search": {"agent": [{"algorithm": {"name__choice": ["PPO", "DQN"]}}]}},
     "search.agent[0].algorithm.name__choice",
     'a trial would set agent[0].algorithm.name to "DQN"; then agent[0].algorithm.n_epochs: unknown key'),
    *[(f"remote_address_{i}", one({"algorithm": {"name": "Random"}}, {"name": "CartPole-v1", "remote": address}),
       "env[0].remote", words) for i, (address, words) in enumerate((
        ("tcp://127.0.0.1:notaport", "the port must be a number from 1 to 65535"),
        ("tcp://127.0.0.1:99999", "the port must be a number from 1 to 65535"),
        ("tcp://127.0.0.1", "a tcp address needs a host and a port"),
        ("tcp://*:5555", '"*" is where a judge listens'),
        ("ipc://", "ipc:// needs a path"),
        ("http://127.0.0.1:80", 'expected "spawn", "ray" or a judge address')))],
    ("pettingzoo_kwargs", one({"algorithm": {"name": "Random"}}, {"name": "pettingzoo.classic.rps_v2:parallel_env",
                                                                   "kwargs": {"nonsense": 1}}, num=2),
     "env[0].kwargs", "nonsense"),
]


@pytest.mark.parametrize("case", [c[0] for c in REJECTED])
def test_known_mismatches_are_one_line_errors_at_their_key(case: str) -> None:
    _, raw, path, words = next(c for c in REJECTED if c[0] == case)
    with pytest.raises(SpecError) as err:
        validate(raw, case)
    assert err.value.path.startswith(path), str(err.value)
    assert words in err.value.message and "\n" not in str(err.value)


ACCEPTED = [
    one({"algorithm": {"name": "PPO"}}, {"name": "FrozenLake-v1", "kwargs": {"is_slippery": False}}, num=2),
    one({"algorithm": {"name": "A2C"}}, {"name": "Blackjack-v1"}, num=2),
    one({"algorithm": {"name": "REINFORCE"}}, {"name": "pettingzoo.classic.rps_v2:parallel_env"}, num=2),
    one({"algorithm": {"name": "DQN", "n_step": 3, "learning_starts": 0}, "memory": {"name": "Replay", "batch_size": 8}},
        {"name": "CartPole-v1"}),
    one({"algorithm": {"name": "PPO"}}, {"name": "tests.space_envs:SpaceEnv", "kwargs": {"obs": "dict", "act": "multidiscrete"}}),
    one({"algorithm": {"name": "PPO"}}, {"name": "pettingzoo.classic.tictactoe_v3:env"}, num=2),
    one({"algorithm": {"name": "A2C"}}, {"name": "tests.space_envs:LabTestSpaces-v0", "kwargs": {"obs": "tuple"},
                                          "vector": "async"}, num=2),
]


@pytest.mark.parametrize("index", range(len(ACCEPTED)))
def test_specs_from_the_issue_that_used_to_crash_now_run(index: int) -> None:
    assert try_spec(ACCEPTED[index]) == ("ran", "")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_remote_where_no_judge_answers_is_refused_by_check_within_seconds(tmp_path: Path, capsys) -> None:
    from slm_lab_like.cli import main

    raw = one({"algorithm": {"name": "Random"}}, {"name": "CartPole-v1", "remote": f"tcp://127.0.0.1:{free_port()}"})
    path = tmp_path / "remote.json"
    path.write_text(json.dumps(raw))
    start = time.perf_counter()
    assert main(["check", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "env[0].remote: no judge answered at" in lines[0], lines
    assert time.perf_counter() - start < 15


@pytest.mark.slow
@pytest.mark.long  # 8-30 s of the default run (5 min on 2 cores)
def test_check_and_test_mode_agree_from_the_command_line(tmp_path: Path, capsys) -> None:
    """check (the command's code, in this process) accepts one spec and refuses another in one line; the accepted one
    runs in test mode as a user runs it (run_lab.py in its own process)."""
    from slm_lab_like.cli import main

    good = tmp_path / "good.json"
    good.write_text(json.dumps(ACCEPTED[0]))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(REJECTED[0][1]))
    assert main(["check", str(good)]) == 0
    assert main(["check", str(bad)]) == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1
    done = subprocess.run([sys.executable, "run_lab.py", str(good), "--mode", "test", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
