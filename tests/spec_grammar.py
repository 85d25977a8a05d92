"""A grammar of valid-looking specs, for checking that `check` never lies: whatever validation accepts must run,
and whatever it rejects must be one line naming a key path.

The grammar draws algorithms, memories, nets and their settings, env entries of every kind (gymnasium copies over
every space kind, PettingZoo parallel and turn-based, lab-native batch, user `module:Class` envs, broken ones)
and body layouts (one or two agents, one or two envs, one to four bodies per pair).
"""
from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.load import validate, with_mode
from tests.space_envs import ACT_KINDS, BROKEN_FAULTS, OBS_KINDS

SPACE_ENV = "tests.space_envs:SpaceEnv"
ALGORITHMS = ("Random", "REINFORCE", "A2C", "PPO", "DQN", "DoubleDQN", "SAC")
MEMORIES = (None, None, None, "Replay", "PrioritizedReplay", "OnPolicyBatch")
NETS = (None, None, "MLP", "ConvNet", "Hydra")

GYM_ENVS = ("CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCarContinuous-v0", "Blackjack-v1",
            "FrozenLake-v1", "CliffWalking-v1")
MULTI_ENVS = ("connect_four", "connect_four_parallel", "tag_arena", "connect_four_batch", "spread",
              "pettingzoo.classic.tictactoe_v3:env", "pettingzoo.classic.rps_v2:parallel_env")
ODD_ENVS = ("collections:OrderedDict", "tests.space_envs:act_space", "NoSuchEnv-v0", "tests.space_envs:BrokenEnv")


@st.composite
def env_entries(draw: st.DrawFn) -> dict[str, Any]:
    """One env entry of any kind, with a small budget."""
    kind = draw(st.sampled_from(("gym", "gym", "space", "space", "multi", "multi", "odd")))
    entry: dict[str, Any] = {"max_frame": 300}
    if kind == "gym":
        entry["name"] = draw(st.sampled_from(GYM_ENVS))
        if entry["name"] == "FrozenLake-v1" and draw(st.booleans()):
            entry["kwargs"] = {"is_slippery": False}
    elif kind == "space":
        entry["name"] = SPACE_ENV
        entry["kwargs"] = {"obs": draw(st.sampled_from(OBS_KINDS)), "act": draw(st.sampled_from(ACT_KINDS))}
    elif kind == "multi":
        entry["name"] = draw(st.sampled_from(MULTI_ENVS))
        entry["max_t"] = 40
    else:
        entry["name"] = draw(st.sampled_from(ODD_ENVS))
        if entry["name"].endswith(":BrokenEnv"):
            entry["kwargs"] = {"fault": draw(st.sampled_from(BROKEN_FAULTS))}
    if draw(st.integers(0, 19)) == 0:
        entry["kwargs"] = {**entry.get("kwargs", {}), "no_such_argument": 1}
    return entry


@st.composite
def agent_entries(draw: st.DrawFn, index: int) -> dict[str, Any]:
    """One agent: an algorithm with a few of its settings, maybe a memory and a net."""
    name = draw(st.sampled_from(ALGORITHMS))
    algorithm: dict[str, Any] = {"name": name}
    if name in ("DQN", "DoubleDQN", "SAC"):
        algorithm.update(n_step=draw(st.sampled_from((1, 2, 3))), learning_starts=draw(st.sampled_from((0, 1, 50))))
    if name == "PPO":
        algorithm["minibatch_size"] = draw(st.sampled_from((4, 64)))
    if name in ("PPO", "A2C"):
        algorithm["critic"] = draw(st.sampled_from(("own", "own", "central")))
    agent: dict[str, Any] = {"name": draw(st.sampled_from((f"agent{index}", f"agent{index}", "agent0"))),
                             "algorithm": algorithm}
    memory = draw(st.sampled_from(MEMORIES))
    if memory == "OnPolicyBatch":
        agent["memory"] = {"name": memory, "n_steps": draw(st.sampled_from((8, 32)))}
    elif memory is not None:
        agent["memory"] = {"name": memory, "batch_size": draw(st.sampled_from((1, 8, 32))), "capacity": 1000}
    net = draw(st.sampled_from(NETS))
    if net is not None:
        agent["net"] = {"name": net, "hid_layers": [draw(st.sampled_from((8, 16)))]}
        lr = draw(st.sampled_from((None, None, 1e-3, 0.0, -1e-3, {"name": "linear", "start": 1e-3, "end": -1e-3})))
        if lr is not None:
            agent["net"]["optim"] = {"lr": lr}
    return agent


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    """A whole raw spec: one or two agents, one or two envs, an outer product of one to four bodies per pair."""
    n_agents = draw(st.integers(1, 2))
    n_envs = draw(st.integers(1, 2))
    return {
        "agent": [draw(agent_entries(i)) for i in range(n_agents)],
        "env": [draw(env_entries()) for _ in range(n_envs)],
        "body": {"product": "outer", "num": draw(st.sampled_from((1, 2, 2, 4)) if n_agents == 1 else st.just(1))},
        "meta": {"max_session": 1, "random_seed": 0, "log_frequency": 10_000},
    }


def try_spec(raw: dict[str, Any]) -> tuple[str, str]:
    """("rejected", message) when validation refuses the spec with a one-line error at a key path,
    ("ran", "") when it accepts it and it runs in test mode, else ("dishonest", what happened)."""
    try:
        spec = validate(raw, "grammar")
    except SpecError as err:
        if not err.path or "\n" in str(err):
            return "dishonest", f"rejected without a one-line key path: {err!r}"
        return "rejected", str(err)
    except Exception as err:  # validation must never raise anything but SpecError
        return "dishonest", f"check crashed: {type(err).__name__}: {err}"
    try:
        Session(with_mode(spec, "test"), seed=0).run()
    except Exception as err:
        return "dishonest", f"accepted, then crashed: {type(err).__name__}: {err}"
    return "ran", ""
