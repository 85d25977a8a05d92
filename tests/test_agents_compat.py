"""slm_lab_like.agents.compat.agent_problem: every rejection with its key and one-line message, agreement with what the build
raises, and acceptance of the agents of every spec in spec/ and of the good combinations by hand."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import slm_lab_like.agents  # noqa: F401  (registers every algorithm, memory and net)
from slm_lab_like.agents.base import AgentContext, BodyGroup, ComponentSpec, space_text
from slm_lab_like.agents.common import group_signatures
from slm_lab_like.agents.compat import agent_problem
from slm_lab_like.agents.config import from_dict
from slm_lab_like.agents.dqn import DQNConfig
from slm_lab_like.agents.memory import PrioritizedReplayConfig
from slm_lab_like.agents.net import ConvNetConfig, HydraConfig, MLPConfig, OptimConfig
from slm_lab_like.agents.ppo import PPOConfig
from slm_lab_like.agents.registry import ALGORITHMS
from slm_lab_like.agents.schedule import Schedule

SPEC_DIR = Path(__file__).resolve().parent.parent / "spec"

VECTOR = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
VECTOR6 = gym.spaces.Box(-1.0, 1.0, (6,), np.float32)
IMAGE_HWC = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
IMAGE_CHW = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
IMAGE_HW = gym.spaces.Box(0.0, 1.0, (84, 84), np.float32)
SMALL_IMAGE = gym.spaces.Box(0, 255, (3, 20, 20), np.uint8)
D2, D3 = gym.spaces.Discrete(2), gym.spaces.Discrete(3)
BOX1 = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
MULTI = gym.spaces.MultiDiscrete([3, 2])
BINARY = gym.spaces.MultiBinary(4)


def spaces_of(env_id: str) -> tuple[gym.Space, gym.Space]:
    env = gym.make(env_id)
    sig = (env.observation_space, env.action_space)
    env.close()
    return sig


def spec(name: str, config: Any = None) -> ComponentSpec:
    return ComponentSpec(name, config)


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "MountainCarContinuous-v0"])
@pytest.mark.parametrize("algo", ["DQN", "DoubleDQN"])
def test_dqn_on_continuous_actions(algo: str, env_id: str) -> None:
    key, message = agent_problem(spec(algo), None, None, [spaces_of(env_id)])
    assert key == "algorithm.name"
    assert message.startswith(f"{algo} takes Discrete actions; got Box(")
    assert message.endswith("; use PPO, A2C, REINFORCE or SAC for continuous actions")


@pytest.mark.parametrize("space", [MULTI, BINARY], ids=["multidiscrete", "multibinary"])
def test_dqn_on_multi_actions(space: gym.Space) -> None:
    key, message = agent_problem(spec("DQN"), None, None, [(VECTOR, space)])
    assert key == "algorithm.name"
    assert message.endswith(f"; use PPO, A2C or REINFORCE for {type(space).__name__} actions")


@pytest.mark.parametrize("algo", ["PPO", "DQN"])
def test_actions_must_start_at_zero_for_learners(algo: str) -> None:
    key, message = agent_problem(spec(algo), None, None, [(VECTOR, gym.spaces.Discrete(3, start=1))])
    assert key == "algorithm.name" and "start at 0" in message and "Discrete(3, start=1)" in message
    assert agent_problem(spec("Random"), None, None, [(VECTOR, gym.spaces.Discrete(3, start=1))]) is None


@pytest.mark.parametrize("algo", ["DQN", "DoubleDQN"])
def test_on_policy_memory_for_dqn(algo: str) -> None:
    message = (f"{algo} learns from Replay or PrioritizedReplay (or a subclass); got OnPolicyBatch; "
               "OnPolicyBatch is for PPO, A2C, REINFORCE and SARSA")
    problem = agent_problem(spec(algo), spec("OnPolicyBatch"), None, [spaces_of("CartPole-v1")])
    assert problem == ("memory.name", message)


@pytest.mark.parametrize("memory", ["Replay", "PrioritizedReplay"])
@pytest.mark.parametrize("algo", ["PPO", "A2C", "REINFORCE"])
def test_replay_for_on_policy_algorithms(algo: str, memory: str) -> None:
    assert agent_problem(spec(algo), spec(memory), None, [spaces_of("CartPole-v1")]) == (
        "memory.name", f"{algo} learns from OnPolicyBatch (or a subclass); got {memory}; {memory} is for DQN, DoubleDQN and SAC")


@pytest.mark.parametrize("algo", ["PPO", "DQN"])
def test_convnet_on_vector_observations(algo: str) -> None:
    key, message = agent_problem(spec(algo), None, spec("ConvNet"), [spaces_of("CartPole-v1")])
    assert key == "net.name"
    assert message.startswith("net ConvNet needs image observations, a 3-D Box (C, H, W) or (H, W, C)")
    assert message.endswith("got Box(shape=(4,), float32); use MLP for vector observations")


@pytest.mark.parametrize("net", ["MLP", "ConvNet", None])
def test_one_input_net_over_several_observation_spaces(net: str | None) -> None:
    sigs = [(IMAGE_CHW, D2), (IMAGE_HWC, D2)] if net == "ConvNet" else [spaces_of("CartPole-v1"),
                                                                          spaces_of("Acrobot-v1")]
    key, message = agent_problem(spec("PPO"), None, None if net is None else spec(net), sigs)
    assert key == "net.name"
    seen = ", ".join(space_text(s) for s, _ in sigs)
    assert message == (f"net {net or 'MLP'} has one input but the agent's bodies see 2 different observation spaces "
                       f"({seen}); use the Hydra net (one head per signature)")


def test_one_output_net_over_several_action_spaces() -> None:
    message = ("net MLP has one output but the agent's bodies have 2 different action spaces; "
               "use the Hydra net (one head per signature)")
    assert agent_problem(spec("DQN"), None, spec("MLP"), [(VECTOR, D2), (VECTOR, D3)]) == ("net.name", message)


@pytest.mark.parametrize("net, key, found", [
    (spec("MLP", MLPConfig(hid_layers=[64, 0])), "net.hid_layers", "expected layer widths >= 1; got [64, 0]"),
    (spec("Hydra", HydraConfig(in_layers=[])), "net.in_layers", "expected at least one layer"),
    (spec("Hydra", HydraConfig(in_layers=[-3])), "net.in_layers", "expected layer widths >= 1; got [-3]"),
    (spec("ConvNet", ConvNetConfig(kernels=[8, 4])), "net.channels", "must have the same length; got (3, 2, 3)"),
    (spec("ConvNet", ConvNetConfig(strides=[4, 0, 1])), "net.strides", "expected values >= 1; got [4, 0, 1]"),
    (spec("ConvNet", ConvNetConfig()), "net.kernels", "conv layer 2 (kernel 3) gets a 1x1 input from the 20x20"),
    (spec("ConvNet", ConvNetConfig(paddings=[1, 1])), "net.paddings", "one value per conv layer (3) or be empty; got 2"),
    (spec("ConvNet", ConvNetConfig(paddings=[0, -1, 0])), "net.paddings", "expected values >= 0; got [0, -1, 0]"),
    (spec("ConvNet", ConvNetConfig(channels=[8] * 3, kernels=[8] * 3, strides=[1] * 3, paddings=[0, 0, 0])),
     "net.kernels", "conv layer 2 (kernel 8) gets a 6x6 input"),
    (spec("MLP", MLPConfig(optim=OptimConfig(lr=Schedule("exponential", start=1e-3, end=0.0)))), "net.optim.lr",
     "an exponential schedule needs start and end of the same sign"),
])
def test_net_settings_that_cannot_be_built(net: ComponentSpec, key: str, found: str) -> None:
    obs = SMALL_IMAGE if net.name == "ConvNet" else VECTOR
    problem = agent_problem(spec("PPO"), None, net, [(obs, D2)])
    assert problem is not None and problem[0] == key and found in problem[1]


def test_schedules_that_cannot_be_evaluated() -> None:
    bad = Schedule("exponential", start=1.0, end=-0.1)
    sig = [spaces_of("CartPole-v1")]
    assert agent_problem(spec("DQN", DQNConfig(epsilon=bad)), None, None, sig)[0] == "algorithm.epsilon"
    assert agent_problem(spec("PPO", PPOConfig(clip_eps=bad)), None, None, sig)[0] == "algorithm.clip_eps"
    memory = spec("PrioritizedReplay", PrioritizedReplayConfig(beta=bad))
    assert agent_problem(spec("DQN"), memory, None, sig)[0] == "memory.beta"


def test_non_box_observations_need_no_net_for_random_only() -> None:
    sig = [(gym.spaces.Discrete(5), D2)]
    assert agent_problem(spec("PPO"), None, None, sig) == ("net.name",
                                                          "net MLP takes Box observations; got Discrete(5)")
    assert agent_problem(spec("Random"), None, None, sig) is None


@pytest.mark.parametrize("part, key", [("algorithm", "algorithm.name"), ("memory", "memory.name"), ("net", "net.name")])
def test_unknown_names(part: str, key: str) -> None:
    parts: dict[str, Any] = {"algorithm": spec("PPO"), "memory": None, "net": None}
    parts[part] = spec("Nope")
    problem = agent_problem(parts["algorithm"], parts["memory"], parts["net"], [spaces_of("CartPole-v1")])
    assert problem is not None and problem[0] == key and problem[1].startswith(f'unknown {part} "Nope"')


GOOD = [
    ("PPO", None, None, [(VECTOR, D2)]),
    ("PPO", "OnPolicyBatch", "MLP", [(VECTOR, BOX1)]),
    ("PPO", None, None, [(VECTOR, MULTI)]),
    ("A2C", None, "MLP", [(VECTOR, BINARY)]),
    ("REINFORCE", None, None, [(VECTOR, gym.spaces.MultiDiscrete([[2, 3], [4, 2]]))]),
    ("PPO", None, "Hydra", [(VECTOR, D2), (VECTOR6, D3), (VECTOR, BOX1), (VECTOR6, MULTI)]),
    ("PPO", None, "ConvNet", [(IMAGE_HWC, D2)]),
    ("A2C", None, "ConvNet", [(IMAGE_CHW, MULTI)]),
    ("DQN", "PrioritizedReplay", "ConvNet", [(IMAGE_HW, D3)]),
    ("DQN", "Replay", "MLP", [(IMAGE_HWC, D3)]),
    ("DoubleDQN", None, "Hydra", [(VECTOR, D2), (VECTOR6, D3)]),
    ("Random", None, None, [(VECTOR, BOX1), (IMAGE_HWC, MULTI), (VECTOR6, BINARY), (gym.spaces.Discrete(4), D2)]),
]


@pytest.mark.parametrize("algo, memory, net, sigs", GOOD)
def test_good_combinations_are_accepted_and_build(algo: str, memory: str | None, net: str | None,
                                                  sigs: list[tuple[gym.Space, gym.Space]]) -> None:
    memory_spec = None if memory is None else spec(memory)
    net_spec = None if net is None else spec(net)
    assert agent_problem(spec(algo), memory_spec, net_spec, sigs) is None
    build(algo, memory_spec, net_spec, sigs)


BAD = [
    ("DQN", None, None, [(VECTOR, BOX1)]),
    ("DQN", "OnPolicyBatch", None, [(VECTOR, D2)]),
    ("PPO", "Replay", None, [(VECTOR, D2)]),
    ("PPO", None, "ConvNet", [(VECTOR, D2)]),
    ("PPO", None, "MLP", [(VECTOR, D2), (VECTOR6, D2)]),
    ("DQN", None, None, [(VECTOR, D2), (VECTOR, D3)]),
    ("A2C", None, spec("MLP", MLPConfig(hid_layers=[0])), [(VECTOR, D2)]),
    ("DQN", None, spec("Hydra", HydraConfig(in_layers=[])), [(VECTOR, D2), (VECTOR6, D2)]),
    ("PPO", None, spec("ConvNet", ConvNetConfig(kernels=[8, 4])), [(IMAGE_HWC, D2)]),
    ("PPO", None, "ConvNet", [(SMALL_IMAGE, D2)]),
    ("REINFORCE", None, None, [(VECTOR, gym.spaces.MultiDiscrete([3, 2], start=[1, 0]))]),
]


@pytest.mark.parametrize("algo, memory, net, sigs", BAD)
def test_rejections_agree_with_the_build(algo: str, memory: str | None, net: str | ComponentSpec | None,
                                         sigs: list[tuple[gym.Space, gym.Space]]) -> None:
    """What agent_problem rejects, building the agent rejects too, with the same one-line reason."""
    memory_spec = None if memory is None else spec(memory)
    net_spec = spec(net) if isinstance(net, str) else net
    _, message = agent_problem(spec(algo), memory_spec, net_spec, sigs)
    assert "\n" not in message
    with pytest.raises(ValueError) as info:
        build(algo, memory_spec, net_spec, sigs)
    assert message.split(";")[0] in str(info.value)


def build(algo: str, memory: ComponentSpec | None, net: ComponentSpec | None,
          sigs: list[tuple[gym.Space, gym.Space]]) -> None:
    """Build the agent on groups of these signatures (small replays: image rows are large)."""
    cls = ALGORITHMS.get(algo)
    groups = [BodyGroup(i, i, f"env{i}", obs, act, 2) for i, (obs, act) in enumerate(sigs)]
    if memory is not None and memory.name in ("Replay", "PrioritizedReplay"):
        memory = spec(memory.name, {"capacity": 64})
    elif memory is None and "Replay" in cls.memory_names:
        memory = spec("Replay", {"capacity": 64})
    cls(from_dict(cls.Config, None), AgentContext(groups, seed=0, memory=memory, net=net))


def spec_names() -> list[tuple[Path, str]]:
    from slm_lab_like.spec.load import read_file
    from slm_lab_like.spec.tournament import is_tournament

    return [(path, name) for path in sorted(SPEC_DIR.rglob("*.json")) for name, raw in read_file(path).items()
            if not is_tournament(raw)]  # a tournament has no agents of its own


@pytest.mark.parametrize("path, name", spec_names(), ids=lambda v: v.stem if isinstance(v, Path) else v)
def test_every_spec_agent_is_accepted(path: Path, name: str) -> None:
    """The agents of the shipped specs pass, on the signatures of the groups the lab builds for them."""
    from slm_lab_like.aeb.space import AEBSpace
    from slm_lab_like.spec.load import load, with_mode

    spec_ = with_mode(load(path, name), "test")
    space = AEBSpace.build(spec_, 0)
    try:
        for agent_spec, algo in zip(spec_.agent, space.agent_space.agents):
            _, sigs = group_signatures(algo.groups)
            assert sigs
            assert agent_problem(agent_spec.algorithm, agent_spec.memory, agent_spec.net, sigs) is None
    finally:
        space.close()
