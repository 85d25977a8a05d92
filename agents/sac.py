"""SAC: soft actor-critic from replay. Box actions get a tanh-squashed Gaussian actor (Haarnoja et al. 2018),
Discrete actions a categorical one (SAC-Discrete, Christodoulou 2019); the group's action space decides.

Read top to bottom: the config; the losses as pure functions (each checked by hand in tests/test_algo_sac.py);
the agent: nets, acting, storing, training (critic step, actor and temperature step, polyak targets), checkpoints.

    critic:  y = r + discount * (1 - terminated) * (min(Q1', Q2')(s', a') - alpha * log pi(a'|s')),  a' ~ pi(.|s')
             (Discrete: the expectation over a' of the same, in closed form); loss mse(Q1(s, a), y) + mse(Q2(s, a), y)
    actor:   mean over s of alpha * log pi(a|s) - min(Q1, Q2)(s, a), a ~ pi(.|s) reparametrised
    alpha:   mean of -log_alpha * (log pi(a|s) + target_entropy): alpha grows while the policy's entropy is below
             the target (-dim(A) for Box, target_entropy_ratio * log|A| for Discrete)

Box actions are squashed into (-1, 1) and scaled to the space's bounds for the env; the replay and the critics keep
the squashed actions, and log pi is the density of the squashed action (the bounds' scale is a constant left out,
as SB3 does). Truncated episodes bootstrap from their true last observation (Transition.bootstrap_obs()). The one
net spec builds the actor and both critics (net.shared is not used); envs with legal-action masks are refused.
"""
from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Sequence

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from slm_lab_like.agents.base import AgentContext, Algorithm, Transition, discrete_n, space_text
from slm_lab_like.agents.common import (build_net, group_signatures, obs_shape, prepare_obs, restore_generator,
                                        stored_obs_dtype, to_tensor, zero_based_problem)
from slm_lab_like.agents.config import resolve_component
from slm_lab_like.agents.memory.replay import NStepAccumulator, Replay, ReplayBatch
from slm_lab_like.agents.net.base import Optim, SplitOptim, flat_dim, net_problem, resolve_device
from slm_lab_like.agents.normalizer import ObsNormalizer
from slm_lab_like.agents.registry import MEMORIES, NETS
from slm_lab_like.array_spaces import space_shape

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
LOG_2PI = math.log(2.0 * math.pi)
LOG_2 = math.log(2.0)


@dataclass
class SACConfig:
    """SAC hyperparameters. `learning_starts`, `train_freq`: agent frames (all bodies); before learning_starts the
    agent acts uniformly at random. Each training round takes `gradient_steps` critic steps; the actor and the
    temperature take one step every `policy_frequency` critic steps, the target critics move toward the critics by
    `polyak_coef` every `target_update_freq` critic steps. `alpha`: the initial temperature (kept fixed unless
    `learn_alpha`), learned at `alpha_lr` (None: the net's lr) toward `target_entropy` (None: -dim(A) for Box
    actions, `target_entropy_ratio` * log|A| for Discrete ones); `log_alpha_min`, `log_alpha_max` clamp log alpha
    after each temperature step (None: unbounded). `discrete_twin`: how Discrete actions' target and actor loss
    combine the twin critics: their minimum (Christodoulou 2019) or their mean (SLM Lab's SD-SAC, against the
    minimum's underestimation). `n_step`: n-step returns per body, as in DQN. `loss`: the critics' regression loss
    (huber: smooth L1). Each critic clips its own gradient norm (`net.clip_grad_norm`), as each net does."""

    gamma: float = field(default=0.99, metadata={"min": 0.0, "max": 1.0})
    n_step: int = field(default=1, metadata={"min": 1})
    learning_starts: int = field(default=1000, metadata={"min": 0})
    train_freq: int = field(default=1, metadata={"min": 1})
    gradient_steps: int = field(default=1, metadata={"min": 1})
    policy_frequency: int = field(default=1, metadata={"min": 1})
    target_update_freq: int = field(default=1, metadata={"min": 1})
    polyak_coef: float = field(default=0.005, metadata={"min": 0.0, "max": 1.0})
    alpha: float = field(default=1.0, metadata={"min": 0.0})
    learn_alpha: bool = True
    alpha_lr: float | None = None
    target_entropy: float | None = None
    target_entropy_ratio: float = field(default=0.89, metadata={"min": 0.0, "max": 1.0})
    log_alpha_min: float | None = None
    log_alpha_max: float | None = None
    discrete_twin: Literal["min", "mean"] = "min"
    loss: Literal["mse", "huber"] = "mse"
    normalize_obs: bool = False


# ---- the losses, as pure functions -------------------------------------------------------------------------------

def tanh_log_det(u: torch.Tensor) -> torch.Tensor:
    """log(1 - tanh(u)^2) per component, computed stably as 2 * (log 2 - u - softplus(-2u))."""
    return 2.0 * (LOG_2 - u - F.softplus(-2.0 * u))


def squashed_gaussian(mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Reparametrised a = tanh(mean + exp(log_std) * noise) and its log-density under the tanh-squashed diagonal
    Gaussian, summed over the last axis: log N(u; mean, std) - sum log(1 - tanh(u)^2)."""
    u = mean + log_std.exp() * noise
    logp = (-0.5 * noise.pow(2) - log_std - 0.5 * LOG_2PI - tanh_log_det(u)).sum(-1)
    return torch.tanh(u), logp


def soft_q_target(rewards: torch.Tensor, terminated: torch.Tensor, discount: float | torch.Tensor,
                  next_q1: torch.Tensor, next_q2: torch.Tensor, next_logp: torch.Tensor,
                  alpha: float | torch.Tensor) -> torch.Tensor:
    """y = r + discount * (1 - terminated) * (min(Q1', Q2')(s', a') - alpha * log pi(a'|s')), a' ~ pi(.|s')."""
    return rewards + discount * (1.0 - terminated) * (torch.min(next_q1, next_q2) - alpha * next_logp)


def twin_q(q1: torch.Tensor, q2: torch.Tensor, twin: str = "min") -> torch.Tensor:
    """The twin critics' values combined: their minimum, or their mean (`twin` "mean")."""
    return torch.min(q1, q2) if twin == "min" else 0.5 * (q1 + q2)


def discrete_soft_q_target(rewards: torch.Tensor, terminated: torch.Tensor, discount: float | torch.Tensor,
                           next_logp_all: torch.Tensor, next_q1: torch.Tensor, next_q2: torch.Tensor,
                           alpha: float | torch.Tensor, twin: str = "min") -> torch.Tensor:
    """The same target with the expectation over a' ~ pi(.|s') in closed form; the next_* are (batch, |A|); the twin
    critics combined by `twin_q`."""
    v = (next_logp_all.exp() * (twin_q(next_q1, next_q2, twin) - alpha * next_logp_all)).sum(-1)
    return rewards + discount * (1.0 - terminated) * v


def actor_loss(q1: torch.Tensor, q2: torch.Tensor, logp: torch.Tensor, alpha: float | torch.Tensor) -> torch.Tensor:
    """mean(alpha * log pi(a|s) - min(Q1, Q2)(s, a)) over reparametrised a ~ pi(.|s)."""
    return (alpha * logp - torch.min(q1, q2)).mean()


def discrete_actor_loss(logp_all: torch.Tensor, q1: torch.Tensor, q2: torch.Tensor,
                        alpha: float | torch.Tensor, twin: str = "min") -> torch.Tensor:
    """mean over s of sum_a pi(a|s) * (alpha * log pi(a|s) - min(Q1, Q2)(s, a)); all (batch, |A|); the twin critics
    combined by `twin_q`."""
    return (logp_all.exp() * (alpha * logp_all - twin_q(q1, q2, twin))).sum(-1).mean()


def _mean(values: Sequence[torch.Tensor]) -> torch.Tensor:
    """sum(values) / len(values), the sum started at its first term (0 + x is x: the same values and gradients)."""
    return sum(values[1:], values[0]) / len(values)


def alpha_loss(log_alpha: torch.Tensor, logp: torch.Tensor, target_entropy: float) -> torch.Tensor:
    """mean(-log_alpha * (log pi(a|s) + target_entropy)), log pi held fixed: its gradient lowers alpha while the
    entropy -log pi is above the target and raises it below."""
    return -(log_alpha * (logp.detach() + target_entropy)).mean()


def discrete_alpha_loss(log_alpha: torch.Tensor, logp_all: torch.Tensor, target_entropy: float) -> torch.Tensor:
    """The same with the expectation over actions: mean(-log_alpha * (sum_a pi(a|s) log pi(a|s) + target_entropy))."""
    logp_all = logp_all.detach()
    return -(log_alpha * ((logp_all.exp() * logp_all).sum(-1) + target_entropy)).mean()


# ---- the agent ---------------------------------------------------------------------------------------------------

class SAC(Algorithm):
    """Soft actor-critic over one or many signatures (net Hydra): an actor, twin critics and their polyak targets,
    one temperature per signature, one replay memory per group."""

    Config = SACConfig
    action_spaces: ClassVar[tuple[type[gym.Space], ...]] = (gym.spaces.Box, gym.spaces.Discrete)
    memory_names: ClassVar[tuple[str, ...]] = ("Replay", "PrioritizedReplay")
    default_net: ClassVar[str | None] = "MLP"
    takes_masks: ClassVar[bool] = False

    @staticmethod
    def critic_inputs(signatures: Sequence[tuple[gym.Space, gym.Space]]) -> list[gym.Space]:
        """What each signature's critics take: its observation (Discrete actions: Q of every action), or the
        observation and the action as one flat vector (Box actions)."""
        return [o if isinstance(a, gym.spaces.Discrete)
                else gym.spaces.Box(-np.inf, np.inf, (flat_dim(obs_shape(o)) + int(np.prod(space_shape(a))),),
                                    np.float32)
                for o, a in signatures]

    @classmethod
    def net_inputs(cls, signatures: Sequence[tuple[gym.Space, gym.Space]]) -> list[list[gym.Space]]:
        """The actor takes the observations; the critics their inputs (see critic_inputs)."""
        return [[o for o, _ in signatures], cls.critic_inputs(signatures)]

    @classmethod
    def action_problem(cls, space: gym.Space) -> str | None:
        """Discrete actions that start at 0, or a Box with finite bounds (actions are squashed into them)."""
        problem = super().action_problem(space) or zero_based_problem(cls.__name__, space)
        if problem is None and isinstance(space, gym.spaces.Box) and not (
                np.isfinite(space.low).all() and np.isfinite(space.high).all()):
            return (f"{cls.__name__} squashes actions into the bounds of a Box; got {space_text(space)} with unbounded "
                    "components; wrap the env to bound its actions")
        return problem

    @classmethod
    def config_problem(cls, config: Any) -> tuple[str, str] | None:
        """A learned temperature must start above 0 (it is learned as log alpha)."""
        if config.learn_alpha and config.alpha <= 0.0:
            return "alpha", f"a learned temperature starts above 0; got {config.alpha}"
        if None not in (config.log_alpha_min, config.log_alpha_max) and config.log_alpha_min > config.log_alpha_max:
            return "log_alpha_max", (f"log alpha's upper bound must be at least its lower bound "
                                     f"{config.log_alpha_min}; got {config.log_alpha_max}")
        return super().config_problem(config)

    def __init__(self, config: SACConfig, ctx: AgentContext) -> None:
        super().__init__(config, ctx)
        self.check_groups()
        problem = self.config_problem(config)
        if problem:
            raise ValueError(f"{problem[0]}: {problem[1]}")
        for g in self.groups:
            if g.masked:
                raise ValueError(f'SAC does not take legal-action masks; env "{g.env_name}" gives them; use DQN or PPO')
        _, net_cls, net_cfg = resolve_component(ctx.net, NETS, self.default_net)
        _, mem_cls, mem_cfg = resolve_component(ctx.memory, MEMORIES, self.memory_to_build(ctx.memory))
        self.device = resolve_device(net_cfg)
        torch.manual_seed(ctx.seed)
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(ctx.seed)
        self.rng = np.random.default_rng(ctx.seed)
        self.sig_of, sigs = group_signatures(self.groups)
        self.discrete = [isinstance(a, gym.spaces.Discrete) for _, a in sigs]
        self.act_dims = [discrete_n(a) if d else int(np.prod(space_shape(a)))
                         for (_, a), d in zip(sigs, self.discrete)]

        # nets: the actor (logits, or mean and log std), twin critics (Q(s, .) for Discrete, Q(s, a) on the
        # observation and the action as one vector for Box) and their frozen polyak-averaged copies
        obs_spaces = [o for o, _ in sigs]
        critic_spaces = self.critic_inputs(sigs)
        actor_out = [[n] if d else [n, n] for d, n in zip(self.discrete, self.act_dims)]
        self.actor = build_net(net_cls, net_cfg, obs_spaces, actor_out, [0.01, 0.01]).to(self.device)
        if not all(self.discrete):
            problem = net_problem(net_cls, net_cfg, critic_spaces)
            if problem:
                raise ValueError(f"net.{problem[0]}: SAC's critics for Box actions take the observation and the "
                                 f"action as one vector: {problem[1]}")
        critic_out = [[n] if d else [1] for d, n in zip(self.discrete, self.act_dims)]
        self.q1 = build_net(net_cls, net_cfg, critic_spaces, critic_out, [1.0]).to(self.device)
        self.q2 = build_net(net_cls, net_cfg, critic_spaces, critic_out, [1.0]).to(self.device)
        self.q1_target, self.q2_target = copy.deepcopy(self.q1), copy.deepcopy(self.q2)
        self.q1_target.requires_grad_(False)
        self.q2_target.requires_grad_(False)
        self.critic_params: list[torch.Tensor] = [*self.q1.parameters(), *self.q2.parameters()]
        self.target_params: list[torch.Tensor] = [*self.q1_target.parameters(), *self.q2_target.parameters()]
        self.actor_optim = Optim(self.actor.parameters(), net_cfg.optim, net_cfg.clip_grad_norm)
        self.critic_optim = SplitOptim([Optim(q.parameters(), net_cfg.optim, net_cfg.clip_grad_norm)
                                        for q in (self.q1, self.q2)])

        # temperature: log alpha per signature, and its target entropy
        self.log_alpha = torch.full((len(sigs),), math.log(config.alpha) if config.alpha > 0 else -math.inf,
                                    device=self.device, requires_grad=config.learn_alpha)
        self.alpha = self.log_alpha.detach().exp()
        alpha_optim = dataclasses.replace(net_cfg.optim, weight_decay=0.0,
                                          **({} if config.alpha_lr is None else {"lr": config.alpha_lr}))
        self.alpha_optim = Optim([self.log_alpha], alpha_optim, None) if config.learn_alpha else None
        self.target_entropy = [config.target_entropy if config.target_entropy is not None
                               else config.target_entropy_ratio * math.log(n) if d else -float(n)
                               for d, n in zip(self.discrete, self.act_dims)]

        # per group: observation normaliser, the Box's scale, replay memory and n-step accumulator
        self.obs_norms = [ObsNormalizer(obs_shape(g.observation_space)) if config.normalize_obs else None
                          for g in self.groups]
        self.bounds: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = []
        for g in self.groups:
            if isinstance(g.action_space, gym.spaces.Box):
                low = np.asarray(g.action_space.low, np.float32).ravel()
                half = (np.asarray(g.action_space.high, np.float32).ravel() - low) / 2
                self.bounds.append((low, half, np.divide(1.0, half, out=np.zeros_like(half), where=half > 0)))
            else:
                self.bounds.append(None)
        layouts = [((), np.dtype(np.int64)) if self.discrete[s] else ((self.act_dims[s],), np.dtype(np.float32))
                   for s in self.sig_of]
        self.memories: list[Replay] = [
            mem_cls(mem_cfg, g.num_bodies, obs_shape(g.observation_space),
                    stored_obs_dtype(g.observation_space, config.normalize_obs), *layout, ctx.seed + i)
            for i, (g, layout) in enumerate(zip(self.groups, layouts))]
        self.nsteps: list[NStepAccumulator | None] = [
            NStepAccumulator(config.n_step, config.gamma, g.num_bodies, obs_shape(g.observation_space),
                             stored_obs_dtype(g.observation_space, config.normalize_obs), *layout)
            if config.n_step > 1 else None for g, layout in zip(self.groups, layouts)]
        self.next_train_frame = max(config.learning_starts, config.train_freq)
        self.last_actor_loss = float("nan")

    def _tensor(self, x: np.ndarray) -> torch.Tensor:
        return to_tensor(x, self.device)

    # ---- acting

    def act(self, group: int, obs: np.ndarray, mask: np.ndarray | None = None,
            acting: np.ndarray | None = None) -> np.ndarray:
        """Sampled actions while training (uniform before learning_starts), greedy ones otherwise: tanh(mean) for
        Box actions (scaled to the bounds), the most likely action for Discrete ones."""
        sig = self.sig_of[group]
        x = prepare_obs(obs, self.obs_norms[group], update=self.training, rows=acting)
        n, dim = len(obs), self.act_dims[sig]
        if self.training and self.frame < self.config.learning_starts:
            if self.discrete[sig]:
                return self._env_action(group, self.rng.integers(0, dim, n))
            return self._env_action(group, self.rng.uniform(-1.0, 1.0, (n, dim)).astype(np.float32))
        with torch.no_grad():
            out = self.actor(self._tensor(x), sig)
        if self.discrete[sig]:
            logits = out[0].cpu().numpy()
            if not self.training:
                return self._env_action(group, logits.argmax(axis=1))
            cum = np.exp(logits - logits.max(axis=1, keepdims=True)).cumsum(axis=1)
            u = self.rng.random((n, 1), dtype=np.float32) * cum[:, -1:]
            return self._env_action(group, np.minimum((u > cum).sum(axis=1), dim - 1))
        mean = out[0].cpu().numpy()
        if not self.training:
            return self._env_action(group, np.tanh(mean))
        std = np.exp(np.clip(out[1].cpu().numpy(), LOG_STD_MIN, LOG_STD_MAX))
        return self._env_action(group, np.tanh(mean + std * self.rng.standard_normal(mean.shape, dtype=np.float32)))

    def _env_action(self, group: int, a: np.ndarray) -> np.ndarray:
        """Actions as the env takes them: Discrete ones in the space's dtype, squashed Box ones scaled to its bounds."""
        space = self.groups[group].action_space
        bounds = self.bounds[group]
        if bounds is None:
            return a.astype(space.dtype, copy=False)
        low, half, _ = bounds
        return (low + (a + 1.0) * half).reshape((len(a),) + space_shape(space)).astype(space.dtype, copy=False)

    def _stored_action(self, group: int, action: np.ndarray) -> np.ndarray:
        """Env actions as the replay keeps them: Box ones back in [-1, 1], flat; Discrete ones as they are."""
        bounds = self.bounds[group]
        if bounds is None:
            return action
        low, _, inv_half = bounds
        a = (action.reshape(len(action), -1).astype(np.float32) - low) * inv_half - 1.0
        return np.clip(a, -1.0, 1.0, out=a)

    # ---- storing

    def update(self, group: int, transition: Transition) -> None:
        """Store the step (true next obs; only the rows of Transition.completed in turn-based envs) and run a training
        round every `train_freq` frames from `learning_starts` on."""
        super().update(group, transition)
        if not self.training:
            return
        t = transition
        obs, action, reward, next_obs, term, trunc = t.obs, t.action, t.reward, t.bootstrap_obs(), t.terminated, \
            t.truncated
        if t.completed is not None:
            rows = t.completed
            obs, action, reward, next_obs, term, trunc = obs[rows], action[rows], reward[rows], next_obs[rows], \
                term[rows], trunc[rows]
        norm = self.obs_norms[group]
        obs, next_obs = prepare_obs(obs, norm, False), prepare_obs(next_obs, norm, False)
        action = self._stored_action(group, action)
        nstep = self.nsteps[group]
        if nstep is None:
            self.memories[group].add(obs, action, reward, next_obs, term)
        else:
            bodies = None if t.completed is None else np.flatnonzero(t.completed)
            r = nstep.add(obs, action, reward, next_obs, term, trunc, None, bodies)
            if len(r.rewards):
                self.memories[group].add(r.obs, r.actions, r.rewards, r.next_obs, r.terminated, None, r.discounts)
        if self.frame >= self.next_train_frame and any(len(m) for m in self.memories):
            self.next_train_frame = self.frame + self.config.train_freq
            self.train()

    def group_finished(self, group: int) -> None:
        """Drop the group's unfinished n-step transitions."""
        nstep = self.nsteps[group]
        if nstep is not None:
            nstep.reset()

    # ---- training

    def train(self) -> None:
        """`gradient_steps` critic steps, each on one batch from every group's replay that holds transitions (losses
        averaged over groups); the actor and temperature every `policy_frequency`, the targets every
        `target_update_freq` of them. Reports the round's last losses to the stats channel."""
        cfg = self.config
        mems = [(self.sig_of[g], m) for g, m in enumerate(self.memories) if len(m) > 0]
        if not mems:
            return
        for optim in (self.critic_optim, self.actor_optim, self.alpha_optim):
            if optim is not None:
                optim.set_frame(self.frame)
        entropy = None
        for _ in range(cfg.gradient_steps):
            batches = [(sig, mem, mem.sample(self.frame)) for sig, mem in mems]
            losses = [self._critic_loss(sig, mem, b) for sig, mem, b in batches]
            critic_loss = _mean([loss for loss, _ in losses])
            grad_norm = self.critic_optim.step(critic_loss)
            self.opt_step += 1
            if self.opt_step % cfg.policy_frequency == 0:
                entropy = self._actor_step([(sig, self._tensor(b.obs)) for sig, _, b in batches])
            if self.opt_step % cfg.target_update_freq == 0:
                with torch.no_grad():
                    torch._foreach_lerp_(self.target_params, self.critic_params, cfg.polyak_coef)
        self.last_loss = float(critic_loss.detach())
        report = {"train/loss": self.last_loss, "train/q_mean": sum(q for _, q in losses) / len(losses),
                  "train/alpha": self.alpha.mean(), "train/lr": self.critic_optim.lr, "train/grad_norm": grad_norm}
        if entropy is not None:
            report.update({"train/actor_loss": self.last_actor_loss, "train/entropy": entropy})
        self.stats.report(self.frame, report)

    def _sample(self, obs: torch.Tensor, sig: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparametrised squashed actions for a batch of observations, and their log-probs."""
        mean, log_std = self.actor(obs, sig)
        noise = torch.randn(mean.shape, generator=self.gen, device=mean.device)
        return squashed_gaussian(mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX), noise)

    @staticmethod
    def _critic_in(obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """A Box-action critic's input: the flattened observation and the squashed action side by side."""
        return torch.cat([obs.reshape(len(obs), -1).float(), action], 1)

    def _critic_loss(self, sig: int, mem: Replay, b: ReplayBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Both critics' squared errors to the soft target on one batch (importance-weighted for prioritized
        replay, whose priorities become the mean |TD error| of the two), and the batch's mean Q1 for the stats."""
        obs, next_obs = self._tensor(b.obs), self._tensor(b.next_obs)
        rewards, term = self._tensor(b.rewards), self._tensor(b.terminated)
        discount = self.config.gamma if b.discounts is None else self._tensor(b.discounts)
        alpha = self.alpha[sig]
        with torch.no_grad():
            if self.discrete[sig]:
                next_logp = torch.log_softmax(self.actor(next_obs, sig)[0], -1)
                y = discrete_soft_q_target(rewards, term, discount, next_logp, self.q1_target(next_obs, sig)[0],
                                           self.q2_target(next_obs, sig)[0], alpha, self.config.discrete_twin)
            else:
                next_a, next_logp = self._sample(next_obs, sig)
                x = self._critic_in(next_obs, next_a)
                y = soft_q_target(rewards, term, discount, self.q1_target(x, sig)[0].squeeze(-1),
                                  self.q2_target(x, sig)[0].squeeze(-1), next_logp, alpha)
        if self.discrete[sig]:
            a = self._tensor(b.actions).unsqueeze(1)
            q1, q2 = self.q1(obs, sig)[0].gather(1, a).squeeze(1), self.q2(obs, sig)[0].gather(1, a).squeeze(1)
        else:
            x = self._critic_in(obs, self._tensor(b.actions))
            q1, q2 = self.q1(x, sig)[0].squeeze(-1), self.q2(x, sig)[0].squeeze(-1)
        q_mean = q1.detach().mean()
        loss = F.smooth_l1_loss if self.config.loss == "huber" else F.mse_loss
        if type(mem) is Replay:
            return loss(q1, y) + loss(q2, y), q_mean
        td1, td2 = q1 - y, q2 - y
        mem.update_priorities(b.indices, (0.5 * (td1.abs() + td2.abs())).detach().cpu().numpy())
        per_sample = loss(q1, y, reduction="none") + loss(q2, y, reduction="none")
        return (per_sample * self._tensor(b.weights)).mean(), q_mean

    def _actor_step(self, batches: list[tuple[int, torch.Tensor]]) -> torch.Tensor:
        """One actor step (critics held fixed) and, when learned, one temperature step, averaged over groups;
        returns the policy's mean entropy on the batches (for the stats)."""
        for p in self.critic_params:
            p.requires_grad_(False)
        losses, alpha_losses, entropies = [], [], []
        for sig, obs in batches:
            alpha = self.alpha[sig]
            if self.discrete[sig]:
                logp_all = torch.log_softmax(self.actor(obs, sig)[0], -1)
                losses.append(discrete_actor_loss(logp_all, self.q1(obs, sig)[0], self.q2(obs, sig)[0], alpha,
                                                  self.config.discrete_twin))
                alpha_losses.append(discrete_alpha_loss(self.log_alpha[sig], logp_all, self.target_entropy[sig]))
                entropies.append(-(logp_all.detach().exp() * logp_all.detach()).sum(-1).mean())
            else:
                a, logp = self._sample(obs, sig)
                x = self._critic_in(obs, a)
                losses.append(actor_loss(self.q1(x, sig)[0].squeeze(-1), self.q2(x, sig)[0].squeeze(-1), logp, alpha))
                alpha_losses.append(alpha_loss(self.log_alpha[sig], logp, self.target_entropy[sig]))
                entropies.append(-logp.detach().mean())
        loss = _mean(losses)
        self.actor_optim.step(loss)
        for p in self.critic_params:
            p.requires_grad_(True)
        self.last_actor_loss = float(loss.detach())
        if self.alpha_optim is not None:
            self.alpha_optim.step(_mean(alpha_losses))
            if self.config.log_alpha_min is not None or self.config.log_alpha_max is not None:
                with torch.no_grad():
                    self.log_alpha.clamp_(self.config.log_alpha_min, self.config.log_alpha_max)
            self.alpha = self.log_alpha.detach().exp()
        return _mean(entropies)

    # ---- checkpoints

    def state_dict(self) -> dict[str, Any]:
        """Actor, critics, target critics, optimisers, temperature, normalisers, generators and counters."""
        state = super().state_dict()
        state.update(actor=self.actor.state_dict(), q1=self.q1.state_dict(), q2=self.q2.state_dict(),
                     q1_target=self.q1_target.state_dict(), q2_target=self.q2_target.state_dict(),
                     actor_optim=self.actor_optim.state_dict(), critic_optim=self.critic_optim.state_dict(),
                     alpha_optim=None if self.alpha_optim is None else self.alpha_optim.state_dict(),
                     log_alpha=self.log_alpha.detach().clone(), next_train_frame=self.next_train_frame,
                     rng=self.rng.bit_generator.state, gen=self.gen.get_state(),
                     obs_norms=[n.state_dict() if n else None for n in self.obs_norms])
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state_dict (replay memories apart, see load_memory_state_dict; pending n-step rows are dropped)."""
        super().load_state_dict(state)
        for name in ("actor", "q1", "q2", "q1_target", "q2_target"):
            getattr(self, name).load_state_dict(state[name])
        self.actor_optim.load_state_dict(state["actor_optim"])
        self.critic_optim.load_state_dict(state["critic_optim"])
        if self.alpha_optim is not None and state["alpha_optim"] is not None:
            self.alpha_optim.load_state_dict(state["alpha_optim"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.alpha = self.log_alpha.detach().exp()
        self.next_train_frame = int(state["next_train_frame"])
        self.rng.bit_generator.state = state["rng"]
        restore_generator(self.gen, state["gen"])
        for n, s in zip(self.obs_norms, state["obs_norms"]):
            if n is not None and s is not None:
                n.load_state_dict(s)
        for nstep in self.nsteps:
            if nstep is not None:
                nstep.reset()

    def memory_state_dict(self) -> dict[str, Any]:
        """Every group's replay memory."""
        return {"replay": [m.state_dict() for m in self.memories]}

    def load_memory_state_dict(self, state: dict[str, Any]) -> None:
        """Restore every group's replay memory."""
        for m, s in zip(self.memories, state["replay"]):
            m.load_state_dict(s)
