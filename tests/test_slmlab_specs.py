"""SLM Lab's spec files read here: v4 JSON and 5.x YAML (anchors, merge keys) recognised by their shape, translated
key by key (every key a line or a one-line refusal at its path), run as they are, and written out by `import`.
The fixtures in tests/slmlab/ are specs written in SLM Lab's formats for these tests, not copies of its files."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from slm_lab_like.agents.memory.replay import PrioritizedReplay, PrioritizedReplayConfig, Replay, ReplayConfig
from slm_lab_like.agents.net.base import Optim, OptimConfig, SplitOptim
from slm_lab_like.cli import main
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.load import load, read_file, validate
from slm_lab_like.spec.slmlab import recognised, translate

HERE = Path(__file__).parent / "slmlab"
V4 = HERE / "v4_ppo_cartpole.json"
ARC = HERE / "classic_arc.yaml"


def v4_raw() -> dict[str, Any]:
    return json.loads(V4.read_text())["ppo_small_cartpole"]


def arc_raw(name: str) -> dict[str, Any]:
    return yaml.safe_load(ARC.read_text())[name]


def refusal(raw: dict[str, Any], name: str = "s") -> SpecError:
    with pytest.raises(SpecError) as err:
        translate(raw, name)
    assert "\n" not in str(err.value)
    return err.value


def test_slm_lab_specs_are_recognised_by_shape_and_the_labs_own_are_not() -> None:
    assert recognised(v4_raw()) and recognised(arc_raw("sac_pendulum_small"))
    assert recognised({"agent": [{"net": {"type": "MLPNet"}}], "env": [{"name": "CartPole-v1"}]})  # early v4 lists
    own = json.loads((Path(__file__).parent.parent / "spec" / "demo.json").read_text())
    assert not recognised(own)


def test_an_early_v4_spec_of_lists_and_a_body_block_is_read() -> None:
    raw = v4_raw()
    del raw["search"]
    del raw["env"]["num_envs"]
    raw = {**raw, "agent": [raw["agent"]], "env": [raw["env"]], "body": {"product": "outer", "num": 3}}
    spec = translate(raw, "early").spec
    assert spec["body"] == {"product": "outer", "num": 3} and spec["agent"][0]["algorithm"]["name"] == "PPO"
    assert validate(spec, "early").body.num == 3


def test_the_v4_ppo_spec_maps_each_setting_to_its_counterpart() -> None:
    spec = load(V4, "ppo_small_cartpole")
    algo, mem, net = spec.agent[0].algorithm.config, spec.agent[0].memory.config, spec.agent[0].net.config
    assert spec.agent[0].algorithm.name == "PPO" and algo.gamma == 0.98 and algo.lam == 0.9
    assert (mem.n_steps, algo.n_epochs, algo.minibatch_size, algo.val_loss_coef) == (32, 3, 64, 0.7)
    assert (algo.clip_eps.start, algo.clip_eps.end, algo.clip_eps.frames, algo.clip_eps.start_frame) == (0.3, 0.1, 4000,
                                                                                                         1000)
    assert algo.entropy_coef == 0.02  # SLM Lab takes end_val 0 as unset: start_val throughout
    assert net.hid_layers == [32, 16] and net.activation == "selu" and net.init == "default" and not net.shared
    assert (net.optim.name, net.optim.lr, net.optim.eps) == ("Adam", 0.001, 1e-8)  # torch's eps, not the lab's
    assert (net.critic_optim.name, net.critic_optim.lr, net.critic_optim.weight_decay) == ("AdamW", 0.002, 0.01)
    assert spec.body.num == 2 and spec.env[0].max_frame == 6000 and spec.meta.max_session == 2


def test_yaml_anchors_and_merge_keys_are_read_and_a_merged_key_is_overridden() -> None:
    names = list(read_file(ARC))
    assert names == ["a2c_acrobot_small", "ddqn_per_cartpole_small", "sac_pendulum_small", "reinforce_cartpole_small"]
    spec = load(ARC, "a2c_acrobot_small")
    algo, net = spec.agent[0].algorithm.config, spec.agent[0].net.config
    assert algo.gamma == 0.97 and algo.lam == 0.95 and algo.advantage == "gae" and algo.normalize_advantage
    assert spec.agent[0].memory.config.n_steps == 16 and net.shared and net.critic_optim is None
    assert net.hid_layers == [64, 64] and net.activation == "tanh" and net.init == "orthogonal"
    assert net.init_gain is None  # this lab's head gains: what actor_init_std / critic_init_std ask for
    assert net.optim.name == "RMSprop" and (net.optim.lr.start, net.optim.lr.end, net.optim.lr.frames) == (0.0007, 0, 20000)


def test_the_dqn_family_takes_slm_labs_cadence_and_target_units() -> None:
    spec = load(ARC, "ddqn_per_cartpole_small")
    algo, mem = spec.agent[0].algorithm.config, spec.agent[0].memory.config
    assert algo.double and algo.explore == "boltzmann" and algo.temperature.start == 2.0
    assert (algo.train_freq, algo.gradient_steps, algo.learning_starts) == (4, 6, 64)  # once a vector step of 4
    assert algo.batch_reuse == 2  # training_iter 3 batches, each trained on training_batch_iter 2 times
    assert algo.target_update == "replace" and algo.target_update_freq == 150  # 100 frames at 6 steps per 4 frames
    assert algo.loss == "huber" and mem.combined and mem.alpha == 0.6 and mem.eps == 1e-4 and mem.beta == 0.0
    assert mem.new_error == 1e5  # SLM Lab enters every new transition at error 100,000
    raw = arc_raw("ddqn_per_cartpole_small")
    del raw["search"]
    raw["agent"]["algorithm"]["name"] = "VanillaDQN"
    for key in ("update_type", "update_frequency"):
        del raw["agent"]["net"][key]
    algo = translate(raw, "v").spec["agent"][0]["algorithm"]
    assert algo["double"] is False and (algo["target_update"], algo["target_update_freq"]) == ("replace", 1)


def test_dqn_reuses_each_batch_for_batch_reuse_steps() -> None:
    from slm_lab_like.agents.base import AgentContext, ComponentSpec, Transition
    from slm_lab_like.agents.dqn import DQN, DQNConfig
    from slm_lab_like.agents.net import MLPConfig
    from tests.helpers import make_group

    ctx = AgentContext([make_group("CartPole-v1", 2)], seed=0, memory=ComponentSpec("Replay", ReplayConfig(batch_size=8)),
                       net=ComponentSpec("MLP", MLPConfig(hid_layers=[8])))
    algo = DQN(DQNConfig(learning_starts=0, train_freq=2, gradient_steps=6, batch_reuse=3), ctx)
    drawn = []
    sample = algo.memories[0].sample
    algo.memories[0].sample = lambda *a, **k: drawn.append(1) or sample(*a, **k)  # type: ignore[method-assign]
    obs = np.zeros((2, 4), np.float32)
    algo.update(0, Transition(obs, algo.act(0, obs), np.ones(2), obs, np.zeros(2, bool), np.zeros(2, bool), obs))
    assert algo.opt_step == 6 and len(drawn) == 2


def test_sac_takes_its_slm_lab_defaults_loss_and_target_entropy() -> None:
    spec = load(ARC, "sac_pendulum_small")
    algo = spec.agent[0].algorithm.config
    assert spec.agent[0].algorithm.name == "SAC" and algo.loss == "huber" and algo.target_entropy_ratio == 0.6
    assert (algo.gradient_steps, algo.train_freq, algo.learning_starts, algo.polyak_coef) == (2, 2, 200, 0.005)
    raw = arc_raw("sac_pendulum_small")
    del raw["agent"]["algorithm"]["training_iter"], raw["agent"]["algorithm"]["training_start_step"]
    algo = translate(raw, "s").spec["agent"][0]["algorithm"]
    assert algo["gradient_steps"] == 2 and algo["learning_starts"] == 1000  # num_envs; max(1000, batch_size)


def test_sac_carries_slm_labs_temperature_bounds_and_averaged_twin_critics() -> None:
    """SLM Lab clamps log alpha to [-5, 2] unless its spec says otherwise, and its discrete SAC (SD-SAC) takes the
    twin critics' mean in the target and the actor's loss."""
    algo = load(ARC, "sac_pendulum_small").agent[0].algorithm.config
    assert (algo.log_alpha_min, algo.log_alpha_max, algo.discrete_twin) == (-5.0, 2.0, "mean")
    raw = arc_raw("sac_pendulum_small")
    raw["agent"]["algorithm"]["log_alpha_min"] = -3
    out = translate(raw, "s")
    assert out.spec["agent"][0]["algorithm"]["log_alpha_min"] == -3
    assert any(line.source.endswith("log_alpha_min") and "clamped" in line.note for line in out.lines)
    raw["agent"]["algorithm"]["log_alpha_max"] = "${max}"
    with pytest.raises(SpecError) as caught:
        translate(raw, "s")
    assert caught.value.path.endswith("algorithm.log_alpha_max")


def test_reinforce_has_no_critic_and_standardised_returns_run_through_time_limits() -> None:
    spec = load(ARC, "reinforce_cartpole_small")
    algo = spec.agent[0].algorithm.config
    assert spec.agent[0].algorithm.name == "REINFORCE" and algo.baseline == "none" and algo.normalize_advantage
    assert algo.through_truncation
    assert algo.entropy_coef == 0.002  # no_decay is SLM Lab's end_val throughout


@pytest.mark.parametrize("path,name", [(V4, "ppo_small_cartpole"), (ARC, "a2c_acrobot_small"),
                                       (ARC, "ddqn_per_cartpole_small"), (ARC, "sac_pendulum_small"),
                                       (ARC, "reinforce_cartpole_small")])
def test_every_key_of_the_slm_lab_spec_has_a_line(path: Path, name: str) -> None:
    raw = read_file(path)[name]
    sources = {line.source for line in translate(raw, name).lines}
    for block in ("agent.algorithm", "agent.memory", "agent.net", "env", "meta"):
        node = raw
        for part in block.split("."):
            node = node[part]
        for key in node:
            assert f"{name}.{block}.{key}" in sources, f"{block}.{key} has no line"


@pytest.mark.parametrize("path,name", [(V4, "ppo_small_cartpole"), (ARC, "ddqn_per_cartpole_small"),
                                       (ARC, "sac_pendulum_small"), (ARC, "reinforce_cartpole_small")])
def test_each_format_runs_as_written_for_a_few_frames(tmp_path: Path, capsys, path: Path, name: str) -> None:
    assert main([str(path), name, "--mode", "test", "--out", str(tmp_path), "-q"]) == 0
    trial = next(tmp_path.iterdir())
    assert json.loads((trial / "spec.json").read_text())["spec"]["name"] == name


def test_the_search_block_in_dotted_and_nested_form_becomes_the_labs() -> None:
    search = load(V4, "ppo_small_cartpole").search
    assert search == {"agent": [{"algorithm": {"gamma__uniform": [0.95, 0.99], "n_epochs__choice": [2, 4, 6]},
                                 "net": {"optim": {"lr__choice": [0.001, 0.003]}}}]}
    search = load(ARC, "ddqn_per_cartpole_small").search  # frames become optimiser steps, value by value
    assert search["agent"][0]["algorithm"] == {"target_update_freq__choice": [150, 300],
                                               "temperature": {"end__uniform": [0.05, 0.2]}}


@pytest.mark.parametrize("key,args", [("training_epoch__qrandint", [2, 6775744770.0, 2]),
                                      ("training_epoch__randint", [2, float("inf")]),
                                      ("training_epoch__qrandint", [2, 8, 0]),
                                      ("gamma__quniform", [0.9, 1e12, 0.01]),
                                      ("gamma__quniform", [0.9, 0.99, -0.01])])
def test_a_discrete_search_range_is_counted_before_a_value_is_made(key: str, args: list) -> None:
    raw = v4_raw()
    raw["search"] = {f"agent.algorithm.{key}": args}
    err = refusal(raw)
    assert err.path == f"s.search.agent.algorithm.{key}"
    assert "a discrete range of 1 to 64 values" in err.message or "expected a whole number" in err.message


@pytest.mark.parametrize("edit,path,words", [
    (lambda r: r["agent"]["net"]["arc"]["modules"]["body"]["Sequential"].insert(1, {"Dropout": {"p": 0.1}}),
     "s.agent.net.arc.modules.body.Sequential[1]", "only Linear layers"),
    (lambda r: r["agent"]["net"]["arc"]["modules"].update(head={"Sequential": []}),
     "s.agent.net.arc.modules", "one module"),
    (lambda r: r["agent"]["algorithm"].update(name="CrossQ"), "s.agent.algorithm.name", "not built here yet"),
    (lambda r: r["agent"]["net"].update(type="RecurrentNet"), "s.agent.net.type", "MLPNet"),
    (lambda r: r["agent"]["net"].update(spectral_norm=True), "s.agent.net.spectral_norm", "no counterpart"),
    (lambda r: r["agent"]["algorithm"].update(num_step_returns=None, lam=None), "s.agent.algorithm.lam",
     "Monte-Carlo"),
    (lambda r: r["agent"]["algorithm"]["entropy_coef_spec"].update(name="rate_decay"),
     "s.agent.algorithm.entropy_coef_spec.name", "linear_decay and no_decay"),
    (lambda r: r["meta"].update(distributed="synced"), "s.meta.distributed", "Hogwild"),
    (lambda r: r["agent"]["net"]["optim_spec"].update(betas=[0.5, 0.9]), "s.agent.net.optim_spec.betas",
     "no counterpart"),
    (lambda r: r.update(env=[r["env"], r["env"]]), "s.env", "one agent and one env"),
    (lambda r: r["agent"]["algorithm"].update(training_frequncy=r["agent"]["algorithm"].pop("training_frequency")),
     "s.agent.algorithm.training_frequncy", 'did you mean "training_frequency"'),
])
def test_what_has_no_counterpart_is_refused_in_one_line_at_its_slm_lab_key(edit: Any, path: str, words: str) -> None:
    raw = copy.deepcopy(arc_raw("a2c_acrobot_small"))
    edit(raw)
    err = refusal(raw)
    assert err.path == path and words in err.message


@pytest.mark.parametrize("edit,path,words", [
    (lambda r: r["env"].update(name="UnityRollerBall"), "s.env.name", "RollerBall"),
    (lambda r: r["env"].update(frame_op="concat"), "s.env.frame_op", "frame_op"),
    (lambda r: r["agent"]["algorithm"].update(gamma=1.5), "s.agent.algorithm.gamma", "as agent[0].algorithm.gamma"),
])
def test_a_problem_found_after_translation_is_told_at_the_slm_lab_key(tmp_path: Path, edit: Any, path: str,
                                                                     words: str) -> None:
    raw = copy.deepcopy(arc_raw("a2c_acrobot_small"))
    edit(raw)
    spec_file = tmp_path / "x.yaml"
    spec_file.write_text(yaml.safe_dump({"s": raw}))
    with pytest.raises(SpecError) as err:
        load(spec_file, "s")
    assert err.value.path == path and words in err.value.message and "\n" not in str(err.value)


def test_value_clipping_by_clip_vloss_takes_clip_eps_and_halves_the_coefficient() -> None:
    raw = v4_raw()
    raw["agent"]["algorithm"].update(clip_vloss=True)
    with pytest.raises(SpecError) as err:  # clip_eps is a schedule in this spec
        translate(raw, "s")
    assert err.value.path == "s.agent.algorithm.clip_vloss"
    raw["agent"]["algorithm"]["clip_eps_spec"].update(name="no_decay")
    algo = translate(raw, "s").spec["agent"][0]["algorithm"]
    assert (algo["clip_vf"], algo["val_loss_coef"]) == (0.1, 0.35)


def test_a_convnet_takes_its_conv_and_dense_layers_and_refuses_batch_norm() -> None:
    raw = arc_raw("ddqn_per_cartpole_small")
    del raw["search"]
    raw["agent"]["net"] = {"type": "ConvNet", "conv_hid_layers": [[32, 8, 4, 0, 1], [64, 4, 2, 0, 1]],
                           "fc_hid_layers": [256], "hid_layers_activation": "relu", "normalize": True,
                           "batch_norm": False, "clip_grad_val": 10.0, "loss_spec": {"name": "SmoothL1Loss"},
                           "optim_spec": {"name": "Adam", "lr": 1e-4}, "update_type": "replace",
                           "update_frequency": 1000}
    net = translate(raw, "s").spec["agent"][0]["net"]
    assert (net["name"], net["channels"], net["kernels"], net["strides"]) == ("ConvNet", [32, 64], [8, 4], [4, 2])
    assert net["hid_layers"] == [256] and net["activation"] == "relu" and "paddings" not in net
    raw["agent"]["net"]["conv_hid_layers"] = [[32, 3, 1, 1, 1], [64, 3, 1, 0]]
    assert translate(raw, "s").spec["agent"][0]["net"]["paddings"] == [1, 0]
    for bad in ([32, 3, 1, 1, 2], [32, 3, 1, -1], [32, 3, 1, 1.5]):  # dilated, a negative or a fractional padding
        raw["agent"]["net"]["conv_hid_layers"] = [[16, 3, 1, 0], bad]
        assert refusal(raw).path == "s.agent.net.conv_hid_layers[1]"
    raw["agent"]["net"]["conv_hid_layers"] = [[32, 8, 4, 0, 1]]
    del raw["agent"]["net"]["batch_norm"]  # SLM Lab's ConvNet default: batch norm on
    assert refusal(raw).path == "s.agent.net.batch_norm"


def test_quirks_of_slm_labs_schedules_are_reproduced() -> None:
    raw = arc_raw("a2c_acrobot_small")
    sched = raw["agent"]["algorithm"]["entropy_coef_spec"]
    sched.update(start_val=0.01, end_val=0.05)  # a rising linear_decay is its end at once in SLM Lab
    assert translate(raw, "s").spec["agent"][0]["algorithm"]["entropy_coef"] == 0.05
    sched.update(end_val=0.001)
    assert translate(raw, "s").spec["agent"][0]["algorithm"]["entropy_coef"]["end"] == 0.001


def test_import_writes_the_labs_spec_and_a_line_per_key(tmp_path: Path, capsys) -> None:
    out = tmp_path / "ppo.json"
    assert main(["import", str(V4), "ppo_small_cartpole", "--to", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "ppo_small_cartpole.agent.algorithm.time_horizon = 32  -> agent[0].memory.n_steps" in printed
    assert "ppo_small_cartpole.agent.algorithm.clip_val_loss = false  -> (nothing)" in printed
    written = json.loads(out.read_text())
    assert validate(written, "ppo").agent[0].memory.config.n_steps == 32
    assert main(["check", str(out)]) == 0
    every = tmp_path / "all.json"
    assert main(["import", str(ARC), "--to", str(every)]) == 0
    assert set(json.loads(every.read_text())) == {"a2c_acrobot_small", "ddqn_per_cartpole_small",
                                                  "sac_pendulum_small", "reinforce_cartpole_small"}


def test_import_of_the_labs_own_spec_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    assert main(["import", "demo", "--to", str(tmp_path / "x.json")]) == 2
    assert "not an SLM Lab spec" in capsys.readouterr().err


def test_combined_replay_puts_the_newest_transitions_last_in_the_next_batch_only() -> None:
    for cls, config in ((Replay, ReplayConfig(capacity=50, batch_size=8, combined=True)),
                        (PrioritizedReplay, PrioritizedReplayConfig(capacity=50, batch_size=8, combined=True))):
        mem = cls(config, 3, (1,), np.float32, (), np.int64, seed=0)
        for step in range(10):
            obs = np.full((3, 1), step, np.float32)
            mem.add(obs, np.zeros(3, np.int64), np.zeros(3), obs, np.zeros(3))
        batch = mem.sample()
        assert batch.obs[-3:, 0].tolist() == [9, 9, 9] and batch.indices[-3:].tolist() == [27, 28, 29]
        assert mem.fresh == 0 and (mem.sample().obs[:, 0] < 10).all()


def test_one_init_gain_reaches_every_layer_heads_included() -> None:
    from slm_lab_like.agents.net.mlp import MLP, MLPConfig

    for gain, expected in ((None, [2**0.5, 0.01, 1.0]), (5 / 3, [5 / 3] * 3)):
        net = MLP(MLPConfig(hid_layers=[8], init_gain=gain), [(8,)], [[2, 1]], [0.01, 1.0])
        weights = [net.body[0].weight, net.out.heads[0].weight, net.out.heads[1].weight]
        tops = [float(torch.linalg.svdvals(w.detach()).max()) for w in weights]
        assert tops == pytest.approx(expected, rel=1e-4)


def test_a_split_optimiser_steps_actor_and_critic_each_with_its_own_rate_and_clip() -> None:
    actor, critic = torch.nn.Linear(3, 2), torch.nn.Linear(3, 1)
    optim = SplitOptim([Optim(actor.parameters(), OptimConfig(lr=0.1), 0.5),
                        Optim(critic.parameters(), OptimConfig(name="SGD", lr=1.0), 0.5)])
    before = critic.weight.detach().clone()
    x = torch.ones(4, 3)
    norm = optim.step(actor(x).pow(2).sum() + 100.0 * critic(x).pow(2).sum())
    assert float(norm) > 0.5 and optim.lr == 0.1
    assert torch.linalg.vector_norm(critic.weight - before) <= 0.5 + 1e-5  # SGD at 1.0 moved by the clipped grad
    state = optim.state_dict()
    optim.load_state_dict(state)
    assert len(state["parts"]) == 2


def test_a_critic_optimiser_without_a_critic_net_of_its_own_is_refused_at_check() -> None:
    spec = {"agent": [{"algorithm": {"name": "PPO"}, "net": {"name": "MLP", "shared": True,
                                                             "critic_optim": {"name": "Adam", "lr": 0.01}}}],
            "env": [{"name": "CartPole-v1", "max_frame": 300}]}
    with pytest.raises(SpecError) as err:
        validate(spec, "shared")
    assert err.value.path == "agent[0].net.critic_optim"
    spec["agent"][0]["net"]["shared"] = False
    assert validate(spec, "apart").agent[0].net.config.critic_optim.lr == 0.01


def _leaf_paths(node: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _leaf_paths(v, path + (k,))] or [path]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _leaf_paths(v, path + (i,))] or [path]
    return [path]


JUNK = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6), st.floats(allow_nan=True), st.text(max_size=8),
                 st.just("${env}"), st.lists(st.integers(0, 9), max_size=3), st.dictionaries(st.text(max_size=4),
                                                                                              st.integers(), max_size=2))


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(["a2c_acrobot_small", "ddqn_per_cartpole_small", "sac_pendulum_small",
                        "reinforce_cartpole_small", "v4"]), st.data())
def test_any_value_anywhere_is_translated_or_refused_in_one_line(name: str, data: Any) -> None:
    """A value of any type at any key of an SLM Lab spec: translated, or one SpecError, never another exception."""
    raw = v4_raw() if name == "v4" else arc_raw(name)
    paths = _leaf_paths(raw)
    path = data.draw(st.sampled_from(paths))
    node = raw
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = data.draw(JUNK)
    try:
        translate(raw, "s")
    except SpecError as e:
        assert "\n" not in str(e)
