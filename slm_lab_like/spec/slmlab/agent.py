"""An SLM Lab agent block (algorithm, memory, net) as this lab's agent: the on-policy family (PPO, ActorCritic,
Reinforce), the value-based family (VanillaDQN, DQN, DoubleDQN, SARSA) and SoftActorCritic."""
from __future__ import annotations

from typing import Any

from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.slmlab.parts import activation, body_layers, lr_frames, optim, schedule
from slm_lab_like.spec.slmlab.record import Block, number

A = "agent[0]"
ON_POLICY = {"PPO": "PPO", "ActorCritic": "A2C", "Reinforce": "REINFORCE"}
VALUE_BASED = {"VanillaDQN": "DQN", "DQNBase": "DQN", "DQN": "DQN", "DoubleDQN": "DQN", "SARSA": "SARSA"}
OFF_POLICY = {"SoftActorCritic": "SAC"}
MISSING = ("CrossQ", "SIL", "PPOSIL", "Random")
SAME = "as this lab does"
NEW_ERROR = 100_000.0  # the TD error SLM Lab's PrioritizedReplay.add_experience gives every new transition


def agent(block: Block, num_envs: int) -> None:
    """Translate the agent block; `num_envs` (SLM Lab's vector width) sets the defaults that depend on it."""
    block.map("name", f"{A}.name")
    algo = block.sub("algorithm")
    name = algo.peek("name")
    if name in ON_POLICY:
        on_policy(algo, block, ON_POLICY[name])
    elif name in VALUE_BASED:
        value_based(algo, block, num_envs)
    elif name in OFF_POLICY:
        soft_actor_critic(algo, block, num_envs)
    else:
        lacking = " (not built here yet)" if name in MISSING else ""
        raise SpecError(algo.at("name"), f'"{name}"{lacking}: the SLM Lab algorithms with a counterpart here are '
                                         f"{', '.join([*ON_POLICY, *VALUE_BASED, *OFF_POLICY])}")
    algo.done()
    block.done()


def _common(algo: Block, target: str, note: str = "") -> None:
    algo.map("name", f"{A}.algorithm.name", target, note)
    algo.map("gamma", f"{A}.algorithm.gamma")


def on_policy(algo: Block, block: Block, target: str) -> None:
    """PPO, ActorCritic (GAE or n-step A2C) and Reinforce, with a separate or shared actor-critic net."""
    _common(algo, target, "no critic; returns standardised and run on through time limits (through_truncation), as "
                          "SLM Lab's" if target == "REINFORCE" else "")
    algo.expect("action_pdtype", ("default",), "Categorical for Discrete actions, Normal for Box ones (its log std a "
                "learned parameter per action here; in SLM Lab a head of the net unless log_std_init is given)",
                "only the default action distribution has a counterpart here")
    algo.expect("action_policy", ("default",), "sample the policy, " + SAME, "only the default policy acts here")
    algo.expect("explore_var_spec", (None,), "no exploration schedule", "no exploration schedule for this algorithm")
    algo.expect("policy_loss_coef", (1, 1.0), "SLM Lab's default", "only 1 has a counterpart here")
    _entropy(algo, target)
    algo.out.set(f"{A}.algorithm.val_loss_coef", 1.0)  # SLM Lab's default
    algo.map("val_loss_coef", f"{A}.algorithm.val_loss_coef", note="times the mean squared error, as in SLM Lab")
    if target == "PPO":
        algo.map("lam", f"{A}.algorithm.lam")
        clip, note = schedule(algo, "clip_eps_spec")
        if clip is None:
            raise algo.refuse("clip_eps_spec", "PPO needs clip_eps_spec")
        algo.map("clip_eps_spec", f"{A}.algorithm.clip_eps", clip, note)
        algo.map("time_horizon", f"{A}.memory.n_steps", note="steps per env (body) between updates")
        algo.map("training_epoch", f"{A}.algorithm.n_epochs")
        algo.out.set(f"{A}.algorithm.minibatch_size", 4)  # SLM Lab's default
        algo.map("minibatch_size", f"{A}.algorithm.minibatch_size", note="rows of all bodies pooled, as in SLM Lab")
        algo.note("training_frequency", "SLM Lab's PPO trains every time_horizon steps")
        algo.note("clip_val_loss", "SLM Lab reads clip_vloss, not this key: no value clipping")
        _value_clip(algo, clip)
        algo.expect("normalize_advantages", ("standardize", None), "advantages standardised per minibatch, " + SAME,
                    "only standardised advantages have a counterpart here")
        algo.expect("symlog", (False, None), "no symlog", "symlog value targets have no counterpart here")
    elif target == "A2C":
        _advantage(algo)
        algo.out.set(f"{A}.algorithm.normalize_advantage", True)
    else:
        algo.map("training_frequency", f"{A}.memory.n_steps", note="steps per env (body) between updates")
        algo.note("center_return", "SLM Lab standardises the returns anyway (mean and std)")
        algo.out.set(f"{A}.algorithm.baseline", "none")
        algo.out.set(f"{A}.algorithm.through_truncation", True)  # SLM Lab cuts its returns only where terminated
        algo.out.set(f"{A}.algorithm.normalize_advantage", True)
    algo.note("normalize_v_targets", "SLM Lab only rescales the value loss by the targets' running std (floor 1) and "
                                     "never de-normalises; under the critic's own Adam that scale mostly cancels: not reproduced")
    _rollout_memory(block)
    net(block.sub("net"), actor_critic=target != "REINFORCE")


def _value_clip(algo: Block, clip: Any) -> None:
    """SLM Lab's clip_vloss: the value kept within clip_eps of the round's old value, the loss halved."""
    if not algo.peek("clip_vloss"):
        algo.note("clip_vloss", "no value clipping")
        return
    if not isinstance(clip, float):
        raise algo.refuse("clip_vloss", "value clipping by a scheduled clip_eps has no counterpart here")
    coef = algo.num("val_loss_coef", 1.0)
    algo.map("clip_vloss", f"{A}.algorithm.clip_vf", clip, "clip_eps; SLM Lab halves the clipped loss: "
                                                           f"val_loss_coef {coef / 2:g} here")
    algo.out.set(f"{A}.algorithm.val_loss_coef", coef / 2)


def _rollout_memory(block: Block) -> None:
    """SLM Lab's OnPolicyBatchReplay (steps of every env, trained on at once) as OnPolicyBatch; nothing else."""
    mem = block.sub("memory")
    name = mem.take("name")
    if name != "OnPolicyBatchReplay":
        raise mem.refuse("name", f'"{name}": OnPolicyBatchReplay for this algorithm (SLM Lab\'s episodic '
                                 "OnPolicyReplay never trains with a vector env)")
    mem.out.set(f"{A}.memory.name", "OnPolicyBatch")
    mem.line("name", name, f"{A}.memory.name", "OnPolicyBatch")
    mem.done()


def _entropy(algo: Block, target: str) -> None:
    coef, note = schedule(algo, "entropy_coef_spec")
    if coef is None:
        if target == "PPO":
            raise algo.refuse("entropy_coef_spec", "SLM Lab's PPO needs it (without it every update is skipped)")
        algo.note("entropy_coef_spec", "no entropy bonus")
        return
    algo.map("entropy_coef_spec", f"{A}.algorithm.entropy_coef", coef, note)


def _advantage(algo: Block) -> None:
    """ActorCritic's advantages: GAE when lam is set, n-step returns when num_step_returns is (SLM Lab then trains
    every num_step_returns steps)."""
    lam, nstep = algo.peek("lam"), algo.peek("num_step_returns")
    if lam is not None:
        algo.map("lam", f"{A}.algorithm.lam", note="GAE")
        algo.out.set(f"{A}.algorithm.advantage", "gae")
        algo.note("num_step_returns", "GAE, as lam is set")
        algo.map("training_frequency", f"{A}.memory.n_steps", note="steps per env (body) between updates")
    elif nstep is not None:
        algo.note("lam", "n-step returns, as lam is null")
        algo.map("num_step_returns", f"{A}.memory.n_steps", note="n-step returns over each rollout")
        algo.out.set(f"{A}.algorithm.advantage", "nstep")
        algo.note("training_frequency", "SLM Lab trains every num_step_returns steps")
    else:
        raise algo.refuse("lam", "lam and num_step_returns both null (Monte-Carlo returns): no counterpart here")


def value_based(algo: Block, block: Block, num_envs: int) -> None:
    """VanillaDQN (no target net: one copied every step), DQN and DoubleDQN (both Double DQN targets in SLM Lab);
    SARSA (on-policy: a round every training_frequency steps per env on what they collected)."""
    vanilla = algo.peek("name") == "VanillaDQN"
    sarsa = algo.peek("name") == "SARSA"
    _common(algo, "SARSA" if sarsa else "DQN")
    if not sarsa:
        algo.out.set(f"{A}.algorithm.double", not vanilla)
    policy = algo.take("action_policy", "epsilon_greedy")
    pdtype = algo.take("action_pdtype", "Argmax")
    explore, note = schedule(algo, "explore_var_spec")
    if explore is None:
        raise algo.refuse("explore_var_spec", "the DQN family needs an exploration schedule")
    if policy == "boltzmann" and pdtype in ("Categorical", "default"):
        algo.out.set(f"{A}.algorithm.explore", "boltzmann")
        algo.map("explore_var_spec", f"{A}.algorithm.temperature", explore, note or "the temperature")
    elif policy == "epsilon_greedy":
        algo.out.set(f"{A}.algorithm.explore", "epsilon_greedy")
        algo.map("explore_var_spec", f"{A}.algorithm.epsilon", explore,
                 note or "epsilon per body (SLM Lab draws one coin for all envs of a step)")
    else:
        raise algo.refuse("action_policy", f'"{policy}" with action_pdtype "{pdtype}": epsilon_greedy, or boltzmann '
                                           "with Categorical, have a counterpart here")
    algo.line("action_policy", policy, f"{A}.algorithm.explore")
    algo.line("action_pdtype", pdtype, None, "goes with action_policy")
    if sarsa:
        _sarsa(algo, block)
        return
    _cadence(algo, num_envs, batch_iter=True)
    _replay(block)
    net_block = block.sub("net")
    steps = algo.num("training_iter", 1, True) * algo.num("training_batch_iter", 1, True)
    train_every = max(algo.num("training_frequency", 1, True), num_envs)
    if vanilla:
        algo.out.set(f"{A}.algorithm.target_update", "replace")
        algo.out.set(f"{A}.algorithm.target_update_freq", 1)
    else:
        _target(net_block, steps, train_every)
    _loss(net_block, f"{A}.algorithm.loss")
    net(net_block, actor_critic=False)


def _sarsa(algo: Block, block: Block) -> None:
    algo.map("training_frequency", f"{A}.memory.n_steps", note="steps per env (body) between rounds; a' is the body's "
                                                               "next action (SLM Lab takes action 0 for a batch's last)")
    _rollout_memory(block)
    net_block = block.sub("net")
    _loss(net_block, f"{A}.algorithm.loss")
    net(net_block, actor_critic=False)


def soft_actor_critic(algo: Block, block: Block, num_envs: int) -> None:
    """SoftActorCritic, discrete (Categorical) or continuous (tanh-squashed Normal), two critics and their targets."""
    _common(algo, "SAC", 'as "SAC", with SLM Lab\'s log alpha clamped to [-5, 2] (unless log_alpha_min or '
                         'log_alpha_max say otherwise) and discrete_twin "mean": for Discrete actions the twin '
                         "critics' mean in the target and the actor's loss, SLM Lab's SD-SAC (the textbook takes "
                         "their minimum)")
    algo.out.set(f"{A}.algorithm.discrete_twin", "mean")
    algo.expect("action_pdtype", ("Categorical", "Normal", "default"), "Categorical for Discrete actions, a "
                "tanh-squashed Normal for Box ones, " + SAME, "only Categorical or Normal have a counterpart here")
    algo.expect("action_policy", ("default",), "sample the policy, " + SAME, "only the default policy acts here")
    algo.expect("explore_var_spec", (None,), "no exploration schedule", "no exploration schedule for SAC")
    batch = Block(block.peek("memory"), block.at("memory"), block.out).num("batch_size", 32, True)
    if "training_start_step" not in algo.data:
        algo.out.set(f"{A}.algorithm.learning_starts", max(1000, batch))
    if "training_iter" not in algo.data:
        algo.out.set(f"{A}.algorithm.gradient_steps", num_envs)
    _cadence(algo, num_envs, batch_iter=False)
    algo.map("policy_delay", f"{A}.algorithm.policy_frequency")
    algo.out.set(f"{A}.algorithm.target_update_freq", algo.num("policy_delay", 1, True))
    algo.map("alpha_lr", f"{A}.algorithm.alpha_lr")
    target = algo.take("target_entropy", "auto")
    if target == "auto":
        algo.out.set(f"{A}.algorithm.target_entropy_ratio", 0.6)
        if "target_entropy" in algo.taken:
            algo.line("target_entropy", target, f"{A}.algorithm.target_entropy_ratio",
                                        "-dim(A) for Box actions, 0.6 log|A| for Discrete ones, as in SLM Lab")
    else:
        algo.out.set(f"{A}.algorithm.target_entropy", number(target, algo.at("target_entropy")))
        algo.line("target_entropy", target, f"{A}.algorithm.target_entropy")
    if algo.peek("fixed_alpha") is not None:
        algo.map("fixed_alpha", f"{A}.algorithm.alpha", note="fixed")
        algo.out.set(f"{A}.algorithm.learn_alpha", False)
    for key, default in (("log_alpha_min", -5.0), ("log_alpha_max", 2.0)):  # SLM Lab's defaults
        algo.out.set(f"{A}.algorithm.{key}", algo.num(key, default))
        algo.map(key, f"{A}.algorithm.{key}", note="log alpha clamped after each temperature step, as in SLM Lab")
    algo.expect("symlog", (False, None), "no symlog", "symlog targets have no counterpart here")
    algo.expect("entropy_penalty_coef", (0, 0.0, None), "none", "no counterpart here")
    algo.expect("alpha_anneal_frames", (0, None), "none", "no counterpart here")
    _replay(block)
    net_block = block.sub("net")
    kind = net_block.take("update_type", "polyak")
    if kind != "polyak":
        raise net_block.refuse("update_type", f'"{kind}": SAC\'s targets follow by polyak averaging here')
    net_block.line("update_type", kind, None, "polyak, " + SAME)
    net_block.map("polyak_coef", f"{A}.algorithm.polyak_coef", note="the online net's weight, as in SLM Lab")
    net_block.note("update_frequency", "SLM Lab's SAC moves its targets after every actor step")
    _loss(net_block, f"{A}.algorithm.loss")
    net(net_block, actor_critic=False)


def _cadence(algo: Block, num_envs: int, batch_iter: bool) -> None:
    """SLM Lab's replay training cadence: a round when a vector step brings the seen frames to a multiple of
    training_frequency (so at most one round per step), of training_iter x training_batch_iter gradient steps."""
    freq = algo.num("training_frequency", 1, True)
    algo.map("training_frequency", f"{A}.algorithm.train_freq", max(freq, num_envs),
             "frames; SLM Lab trains at most once per vector step of num_envs frames")
    algo.map("training_start_step", f"{A}.algorithm.learning_starts")
    iters = algo.num("training_iter", 1, True)
    per_batch = algo.num("training_batch_iter", 1, True) if batch_iter else 1
    if "training_iter" in algo.data:
        algo.map("training_iter", f"{A}.algorithm.gradient_steps", iters * per_batch,
                 "gradient steps per round" + (" (x training_batch_iter)" if batch_iter else ""))
    if batch_iter:
        algo.out.set(f"{A}.algorithm.batch_reuse", per_batch)
    if batch_iter and "training_batch_iter" in algo.data:
        algo.line("training_batch_iter", algo.take("training_batch_iter"), f"{A}.algorithm.batch_reuse",
                  "steps on each batch, as SLM Lab's; gradient_steps = training_iter x training_batch_iter")


def _target(net_block: Block, steps: int, train_every: int) -> None:
    """SLM Lab's target net update: replace every update_frequency frames, or polyak every vector step."""
    kind = net_block.take("update_type", "replace")
    net_block.out.set(f"{A}.algorithm.target_update", kind)
    net_block.line("update_type", kind, f"{A}.algorithm.target_update")
    if kind == "replace":
        frames = net_block.num("update_frequency", 1, True)
        per_step = max(1, round(frames * steps / train_every))
        net_block.map("update_frequency", f"{A}.algorithm.target_update_freq", per_step,
                      f"frames in SLM Lab; {steps} gradient steps every {train_every} frames here")
        net_block.note("polyak_coef", "unused with replace")
    elif kind == "polyak":
        net_block.map("polyak_coef", f"{A}.algorithm.polyak_coef", note="the online net's weight, as in SLM Lab")
        net_block.out.set(f"{A}.algorithm.target_update_freq", steps)
        net_block.note("update_frequency", "SLM Lab averages every vector step (once per round of gradient steps here)")
    else:
        raise net_block.refuse("update_type", f'"{kind}": replace or polyak')


def _replay(block: Block) -> None:
    mem = block.sub("memory")
    name = mem.take("name")
    if name not in ("Replay", "PrioritizedReplay"):
        raise mem.refuse("name", f'"{name}": Replay or PrioritizedReplay for this algorithm')
    mem.out.set(f"{A}.memory.name", name)
    mem.line("name", name, f"{A}.memory.name", "without importance weights (beta 0), each new transition entered "
             "at error 100000, as SLM Lab's" if name == "PrioritizedReplay" else "")
    mem.map("batch_size", f"{A}.memory.batch_size")
    mem.map("max_size", f"{A}.memory.capacity", mem.num("max_size", 0, True))
    mem.map("use_cer", f"{A}.memory.combined", note="combined experience replay")
    if name == "PrioritizedReplay":
        mem.map("alpha", f"{A}.memory.alpha")
        mem.map("epsilon", f"{A}.memory.eps")
        mem.out.set(f"{A}.memory.beta", 0.0)
        mem.out.set(f"{A}.memory.new_error", NEW_ERROR)
    mem.done()


def _loss(net_block: Block, target: str) -> None:
    spec = net_block.peek("loss_spec", {"name": "MSELoss"})
    name = spec.get("name") if isinstance(spec, dict) else None
    losses = {"MSELoss": "mse", "SmoothL1Loss": "huber"}
    if name not in losses or set(spec) != {"name"}:
        raise SpecError(net_block.at("loss_spec"), f"{spec}: MSELoss or SmoothL1Loss (no arguments) here")
    net_block.map("loss_spec", target, losses[name])


def net(block: Block, actor_critic: bool) -> None:
    """The net: an MLP of the same hidden layers, or a ConvNet of the same layers; one optimiser, or the actor's and
    the critic's."""
    kind = block.take("type")
    if kind not in ("MLPNet", "TorchArcNet", "ConvNet"):
        raise block.refuse("type", f'"{kind}": MLPNet, ConvNet, or a TorchArcNet of one Sequential, has a counterpart '
                                   "here")
    if kind == "ConvNet":
        _conv(block)
    else:
        widths, act = body_layers(block)
        block.out.set(f"{A}.net.name", "MLP")
        block.line("type", kind, f"{A}.net.name", "MLP")
        block.map("hid_layers" if kind == "MLPNet" else "arc", f"{A}.net.hid_layers", widths)
        if kind == "MLPNet":
            block.map("hid_layers_activation", f"{A}.net.activation", act)
            block.note("normalize", "SLM Lab's MLPNet does not read it")
        else:
            block.out.set(f"{A}.net.activation", act)
            block.note("hid_layers_activation", "the init's gain only, in SLM Lab's TorchArcNet")
    _init(block)
    for key in ("actor_init_std", "critic_init_std"):
        block.note(key, "SLM Lab renames it to init_std, which no net reads: no effect there either")
    block.expect("batch_norm", (False, None), "none", "batch norm has no counterpart in the MLP here")
    block.expect("layer_norm", (False, None), "none", "layer norm has no counterpart in the MLP here")
    block.expect("out_layer_activation", (None,), "linear heads, " + SAME, "output activations have no counterpart")
    block.expect("normalize", (False, None), "none", "x/255 input scaling has no counterpart for an MLP here")
    block.map("clip_grad_val", f"{A}.net.clip_grad_norm", note="the gradient's norm, per net, as in SLM Lab")
    if "clip_grad_val" not in block.taken:
        block.out.set(f"{A}.net.clip_grad_norm", None)
    block.map("gpu", f"{A}.net.gpu", block.peek("gpu") is True, "CPU unless true (SLM Lab's auto takes CUDA where there)")
    if not actor_critic or block.peek("use_same_optim", True) or block.peek("shared"):
        _one_optim(block, actor_critic)
    else:
        _two_optims(block)
    if actor_critic or "log_std_init" in block.data and block.out.spec["agent"][0]["algorithm"]["name"] == "REINFORCE":
        block.map("log_std_init", f"{A}.algorithm.log_std_init", note="the Normal's log std, a learned parameter")
    if actor_critic:
        block.map("shared", f"{A}.net.shared")
        if "shared" not in block.taken:
            raise block.refuse("shared", "SLM Lab's actor-critic nets need shared")
        if "loss_spec" in block.data:
            _loss_is_mse(block)
    else:
        block.note("loss_spec", "unused: no critic")
        block.note("shared", "unused: no critic")
    block.done()


def _init(block: Block) -> None:
    """SLM Lab's init_fn orthogonal_ as this lab's orthogonal init: sqrt 2 in the hidden layers, 0.01 in the policy
    head and 1 in the value head, the gains SLM Lab's actor_init_std and critic_init_std ask for. SLM Lab itself puts
    the activation's gain on every layer, heads included (those keys never reach its heads); measured on its
    a2c_gae_cartpole_arc, that init left 2 of 4 sessions collapsed (mean 373) where this one reached 495."""
    init = block.take("init_fn", None)
    if init not in (None, "orthogonal_"):
        raise block.refuse("init_fn", f'"{init}": orthogonal_ or torch\'s default init here')
    block.out.set(f"{A}.net.init", "orthogonal" if init else "default")
    if init is not None:
        block.line("init_fn", init, f"{A}.net.init", "orthogonal: gain sqrt 2 in the hidden layers, 0.01 and 1 in the "
                                                     "policy and value heads (SLM Lab: the activation's gain in every "
                                                     "layer)")


def _conv(block: Block) -> None:
    """SLM Lab's ConvNet: conv layers [out, kernel, stride, padding, dilation 1], then fc_hid_layers; pixels /255
    (this lab's ConvNet scales uint8 images so), no batch norm."""
    layers = block.peek("conv_hid_layers")
    if not isinstance(layers, list) or not layers:
        raise block.refuse("conv_hid_layers", "expected a list of [out, kernel, stride, padding, dilation]")
    pads = []
    for i, layer in enumerate(layers):
        at = block.at(f"conv_hid_layers[{i}]")
        if not isinstance(layer, list) or not 3 <= len(layer) <= 5 or any(isinstance(v, list) for v in layer) \
                or list(layer[4:]) not in ([], [1]):
            raise SpecError(at, f"{layer}: square kernels, strides and paddings, and dilation 1 have a counterpart here")
        pads.append(number(layer[3], at, True) if len(layer) > 3 else 0)
        if pads[-1] < 0:
            raise SpecError(at, f"{layer}: a padding >= 0")
    block.out.set(f"{A}.net.name", "ConvNet")
    block.line("type", "ConvNet", f"{A}.net.name")
    block.map("conv_hid_layers", f"{A}.net.channels", [number(layer[0], block.at("conv_hid_layers"), True) for layer in layers],
              "out channels; kernels, strides and paddings beside them")
    block.out.set(f"{A}.net.kernels", [number(layer[1], block.at("conv_hid_layers"), True) for layer in layers])
    block.out.set(f"{A}.net.strides", [number(layer[2], block.at("conv_hid_layers"), True) for layer in layers])
    if any(pads):
        block.out.set(f"{A}.net.paddings", pads)
    block.map("fc_hid_layers", f"{A}.net.hid_layers")
    block.map("hid_layers_activation", f"{A}.net.activation", activation(block))
    if block.take("batch_norm", True):
        raise block.refuse("batch_norm", "batch norm (SLM Lab's ConvNet default) has no counterpart here; set it false")
    block.line("batch_norm", False, None, "none")
    if not block.take("normalize", False):
        raise block.refuse("normalize", "false: this lab's ConvNet always scales uint8 pixels to [0, 1] (normalize "
                                        "true)")
    block.line("normalize", True, None, "uint8 pixels scaled to [0, 1], as this lab's ConvNet does")


def _one_optim(block: Block, actor_critic: bool) -> None:
    key = "optim_spec" if "optim_spec" in block.data else "actor_optim_spec"
    frames = lr_frames(block, "lr_scheduler_spec" if "lr_scheduler_spec" in block.data else "actor_lr_scheduler_spec")
    block.map(key, f"{A}.net.optim", optim(block, key, frames), "torch's defaults where SLM Lab's spec is silent")
    block.note("lr_scheduler_spec", "a linear lr schedule to 0 (per frame here, per round in SLM Lab)")
    block.note("actor_lr_scheduler_spec", "a linear lr schedule to 0 (per frame here, per round in SLM Lab)")
    if actor_critic and not block.peek("shared"):  # SLM Lab gives each net its own optimiser (and its own clipping)
        block.out.set(f"{A}.net.critic_optim", "same")
    block.note("use_same_optim", "one optimiser setting; actor and critic each step their own, as in SLM Lab")
    for key in ("critic_optim_spec", "critic_lr_scheduler_spec"):
        block.note(key, "unused: use_same_optim or a shared net")


def _two_optims(block: Block) -> None:
    actor = lr_frames(block, "actor_lr_scheduler_spec") or lr_frames(block, "lr_scheduler_spec")
    critic = lr_frames(block, "critic_lr_scheduler_spec") or lr_frames(block, "lr_scheduler_spec")
    block.map("actor_optim_spec", f"{A}.net.optim", optim(block, "actor_optim_spec", actor),
              "torch's defaults where SLM Lab's spec is silent")
    block.map("critic_optim_spec", f"{A}.net.critic_optim", optim(block, "critic_optim_spec", critic),
              "the critic's own optimiser")
    for key in ("lr_scheduler_spec", "actor_lr_scheduler_spec", "critic_lr_scheduler_spec"):
        block.note(key, "a linear lr schedule to 0 (per frame here, per round in SLM Lab)")
    block.note("use_same_optim", "false: the actor's and the critic's optimisers")
    block.note("optim_spec", "unused: use_same_optim is false")


def _loss_is_mse(block: Block) -> None:
    spec = block.peek("loss_spec")
    if spec != {"name": "MSELoss"}:
        raise block.refuse("loss_spec", f"{spec}: the value loss here is the mean squared error (MSELoss)")
    block.note("loss_spec", "the value loss is the mean squared error, " + SAME)

