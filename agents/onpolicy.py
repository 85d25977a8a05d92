"""The shared machinery of REINFORCE, A2C and PPO: act, per-group rollouts, bootstrapping, normalisers, state."""
# No `from __future__ import annotations` here: classes of this module are subclassed or built elsewhere (dataclass
# and NamedTuple __init__ methods), and string annotations would then resolve only in this module's namespace, not
# where the API reference and typing.get_type_hints read them.

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from slm_lab_like.agents.base import AgentContext, Algorithm, Transition, discrete_n, space_text
from slm_lab_like.agents.common import (group_signatures, obs_shape, prepare_obs, restore_generator, stored_obs_dtype,
                                        to_tensor, zero_based_problem)
from slm_lab_like.agents.config import resolve_component
from slm_lab_like.agents.critic import CentralCritic, Team, critic_input_problem
from slm_lab_like.agents.explore import masked
from slm_lab_like.agents.losses import bootstrap_truncated
from slm_lab_like.agents.memory.onpolicy import OnPolicyBatch
from slm_lab_like.agents.net.base import NetConfig, Optim, SplitOptim, resolve_device
from slm_lab_like.agents.net.recurrent import Seq
from slm_lab_like.agents.normalizer import ObsNormalizer, RewardScaler, RunningMeanStd
from slm_lab_like.agents.policy import ActorCritic, action_layout
from slm_lab_like.agents.registry import MEMORIES, NETS
from slm_lab_like.agents.schedule import Schedule
from slm_lab_like.agents.stats import explained_variance
from slm_lab_like.array_spaces import ARRAY_SPACES


@dataclass
class OnPolicyConfig:
    """Hyperparameters common to the on-policy algorithms. `value_norm` (with a critic): the critic learns returns
    standardised by their running mean and variance and its outputs are de-standardised wherever a value is used
    (MAPPO's value normalisation: one scale of targets however large the returns grow)."""

    gamma: float = field(default=0.99, metadata={"min": 0.0, "max": 1.0})
    entropy_coef: float | Schedule = field(default=0.0, metadata={"min": 0.0})
    val_loss_coef: float = field(default=0.5, metadata={"min": 0.0})
    normalize_advantage: bool = True
    normalize_obs: bool = False
    normalize_reward: bool = False
    value_norm: bool = False
    log_std_init: float = 0.0


class Rollout(NamedTuple):
    """One group's flattened rollout as tensors, ready for the loss; with a central critic `critic_obs` holds
    each row's critic input (critic signature `csig`)."""

    sig: int
    obs: torch.Tensor
    actions: torch.Tensor
    logps: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    masks: torch.Tensor | None = None
    critic_obs: torch.Tensor | None = None
    csig: int = 0
    seq: Seq | None = None
    row_of: torch.Tensor | None = None

    def rows(self, idx: torch.Tensor, advantages: torch.Tensor) -> "Rollout":
        """The rollout's rows `idx` (a minibatch), with the given advantages for them. Gathered by `index_select`,
        a third of advanced indexing's time on CPU."""

        def take(t: torch.Tensor) -> torch.Tensor:
            return t.index_select(0, idx)

        return Rollout(self.sig, take(self.obs), take(self.actions), take(self.logps), take(self.values), advantages,
                       take(self.returns), None if self.masks is None else take(self.masks),
                       None if self.critic_obs is None else take(self.critic_obs), self.csig)

    @property
    def sequences(self) -> int:
        """How many sequences a recurrent rollout holds (0 for a feed-forward one)."""
        return 0 if self.seq is None else self.seq.state.shape[0]

    def columns(self, cols: torch.Tensor) -> "Rollout":
        """A recurrent rollout's sequences `cols` (a minibatch): their observations (T, len(cols), ...), states and
        flags, and the rows of the flat fields that they hold, step-major as the policy unrolls them."""
        assert self.seq is not None and self.row_of is not None
        rows = self.row_of[:, cols].reshape(-1)
        rows = rows[rows >= 0]
        seq = Seq(self.seq.state[cols], None if self.seq.lengths is None else self.seq.lengths[cols])
        return Rollout(self.sig, self.obs[:, cols], self.actions[rows], self.logps[rows], self.values[rows],
                       self.advantages[rows], self.returns[rows], None if self.masks is None else self.masks[rows],
                       None if self.critic_obs is None else self.critic_obs[:, cols], self.csig, seq)


class Pending(NamedTuple):
    """A step's decision kept from act to update: actions, log-probs and values, and the recurrent states and
    episode-start flags the bodies acted from (zero-width states for a feed-forward policy)."""

    action: np.ndarray
    logp: np.ndarray
    value: np.ndarray
    state: np.ndarray
    start: np.ndarray


class OnPolicyAlgorithm(Algorithm):
    """Collects a rollout per group, then learns from all full rollouts at once (`learn`, per algorithm).

    Acts in Discrete, Box, MultiDiscrete and MultiBinary spaces (legal-action masks: Discrete only) and
    learns from OnPolicyBatch rollouts. With `critic: "central"` in the config (PPO, A2C) the critic is
    central (agents.critic): the lab builds the agent with a TeamContext and sets `team_now` before each act
    and update of a group."""

    action_spaces: ClassVar[tuple[type[gym.Space], ...]] = ARRAY_SPACES
    memory_names: ClassVar[tuple[str, ...]] = ("OnPolicyBatch",)
    default_net: ClassVar[str | None] = "MLP"
    uses_critic: bool = True
    takes_recurrent = True
    through_truncation: bool = False  # a truncation does not end a return (REINFORCE's option)

    @classmethod
    def action_problem(cls, space: gym.Space) -> str | None:
        """A space of action_spaces whose categorical actions start at 0."""
        return super().action_problem(space) or zero_based_problem(cls.__name__, space)

    def __init__(self, config: Any, ctx: AgentContext) -> None:
        super().__init__(config, ctx)
        self.check_groups()
        for g in self.groups:
            if g.masked and not isinstance(g.action_space, gym.spaces.Discrete):
                raise ValueError(f'legal-action masks need Discrete actions; env "{g.env_name}" has '
                                 f'{space_text(g.action_space)}')
        _, net_cls, net_cfg = resolve_component(ctx.net, NETS, self.default_net)
        _, mem_cls, mem_cfg = resolve_component(ctx.memory, MEMORIES, self.memory_to_build(ctx.memory))
        self.net_cfg: NetConfig = net_cfg
        self.device = resolve_device(net_cfg)
        torch.manual_seed(ctx.seed)
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(ctx.seed)
        self.rng = np.random.default_rng(ctx.seed)
        self.sig_of, sigs = group_signatures(self.groups)
        self.central = getattr(config, "critic", "own") == "central" and self.uses_critic
        teams = self._teams(ctx) if self.central else []
        critic_input = getattr(config, "critic_input", "all")
        self.critic_of: list[int] = []
        critic_spaces: list[gym.Space] = []
        for t in teams:
            space = t.input_space(critic_input)
            same = [i for i, known in enumerate(critic_spaces) if known == space]
            self.critic_of.append(same[0] if same else len(critic_spaces))
            if not same:
                critic_spaces.append(space)
        self.policy = ActorCritic(net_cls, net_cfg, sigs, critic=self.uses_critic, log_std_init=config.log_std_init,
                                  critic_spaces=critic_spaces if self.central else None).to(self.device)
        self.optim = self._optimiser(net_cfg)
        self.obs_norms = [ObsNormalizer(obs_shape(g.observation_space)) if config.normalize_obs else None
                          for g in self.groups]
        self.rew_scalers = [RewardScaler(g.num_bodies, config.gamma) if config.normalize_reward else None
                            for g in self.groups]
        self.value_norm = RunningMeanStd() if config.value_norm and self.uses_critic else None
        self.memories: list[OnPolicyBatch] = []
        for g in self.groups:
            layout = action_layout(g.action_space)
            mem = mem_cls(mem_cfg, g.num_bodies, obs_shape(g.observation_space), layout.shape, layout.dtype,
                          stored_obs_dtype(g.observation_space, config.normalize_obs))
            if g.turns or g.masked:
                mem.add_extras(g.turns, discrete_n(g.action_space) if g.masked else None)
            self.memories.append(mem)
        self.team: CentralCritic | None = None
        if self.central:
            self.team = CentralCritic(teams, [m.n_steps for m in self.memories], config.normalize_obs,
                                      critic_input, self.device)
            for gi, norm in enumerate(self.obs_norms):
                if norm is not None and self.team.whole(gi):  # the group's obs are the joint obs: one normaliser
                    self.team.norms[gi][0] = norm
        self.team_now = self.team.team_now if self.team is not None else None
        self.recurrent = self.policy.recurrent
        size = self.policy.state_size
        self.seq_len: int | None = getattr(net_cfg, "seq_len", None)
        self.hidden = [np.zeros((g.num_bodies, size), np.float32) for g in self.groups]  # before each body's next step
        self.fresh = [np.ones(g.num_bodies, bool) for g in self.groups]  # its next step starts an episode
        if self.recurrent:
            for mem in self.memories:
                mem.add_states(size)
        self.pending: list[Pending | None] = [None] * len(self.groups)
        self.decisions = [Pending(np.zeros(0), np.zeros(g.num_bodies, np.float32), np.zeros(g.num_bodies, np.float32),
                                  np.zeros((g.num_bodies, size), np.float32), np.ones(g.num_bodies, bool))
                          if g.turns else None for g in self.groups]
        self.active = [True] * len(self.groups)

    @classmethod
    def config_problem(cls, config: Any) -> tuple[str, str] | None:
        """A critic input chosen without a central critic, or the base's problems."""
        return critic_input_problem(config) or super().config_problem(config)

    @classmethod
    def has_separate_critic(cls, config: Any, net_config: Any) -> bool:
        """A critic net apart from the actor's: a critic not shared (a central one never is)."""
        return cls.uses_critic and (not net_config.shared or getattr(config, "critic", "own") == "central")

    def _optimiser(self, net_cfg: NetConfig) -> Optim | SplitOptim:
        """One optimiser over actor and critic, or with `net.critic_optim` one each (each clipping its own norm)."""
        if net_cfg.critic_optim is None or not hasattr(self.policy, "critic"):
            return Optim(self.policy.parameters(), net_cfg.optim, net_cfg.clip_grad_norm)
        critic = list(self.policy.critic.parameters())
        ids = {id(p) for p in critic}
        actor = [p for p in self.policy.parameters() if id(p) not in ids]
        return SplitOptim([Optim(actor, net_cfg.optim, net_cfg.clip_grad_norm),
                           Optim(critic, net_cfg.optim if net_cfg.critic_optim == "same" else net_cfg.critic_optim,
                                 net_cfg.clip_grad_norm)])

    def _teams(self, ctx: AgentContext) -> list[Team]:
        """Each group's Team for a central critic; ValueError when the context has none (built outside the lab)."""
        teams = list(getattr(ctx, "teams", ()))
        if len(teams) != len(self.groups) or any(t is None for t in teams):
            raise ValueError('critic "central" needs the team of each body group: build the agent with an '
                             "slm_lab_like.agents.critic.TeamContext (the lab's AgentSpace does)")
        for g, t in zip(self.groups, teams):
            if t.observation_space != g.observation_space or t.hi - t.lo != g.num_bodies:
                raise ValueError(f'critic "central": the team of env "{g.env_name}" does not hold its group\'s bodies')
        return teams

    def _tensor(self, x: np.ndarray) -> torch.Tensor:
        return to_tensor(x, self.device)

    def act(self, group: int, obs: np.ndarray, mask: np.ndarray | None = None,
            acting: np.ndarray | None = None) -> np.ndarray:
        """Sample actions for a group's bodies (greedy/mean when not training) and remember log-probs and values;
        in turn-based envs each acting body's decision is kept until its transition completes."""
        sig = self.sig_of[group]
        norm = self.obs_norms[group]
        prepared = prepare_obs(obs, norm, update=self.training, rows=acting)
        x = self._tensor(prepared)
        seq = Seq(self._tensor(self.hidden[group])) if self.recurrent else None
        if self.team is not None and self.training:
            cx = self.team.now(group, True, prepared if self.team.whole(group) else None)
            a, logp, v, state = self.policy.act(x, sig, False, self.rng, mask, cx, self.critic_of[group], seq)
        else:
            a, logp, v, state = self.policy.act(x, sig, not self.training, self.rng, mask, seq=seq)
        v = self._values(v)
        before, fresh = self._advance(group, state, acting)
        if self.training:
            decision = self.decisions[group]
            if decision is None:
                self.pending[group] = Pending(a, logp, v, before, fresh)
            else:
                rows = slice(None) if acting is None else acting
                decision.logp[rows] = logp[rows]
                decision.value[rows] = v[rows]
                if self.recurrent:
                    decision.state[rows] = before[rows]
                    decision.start[rows] = fresh[rows]
        return self.policy.env_action(a, sig)

    def policy_value(self, group: int, obs: np.ndarray, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(action probabilities (B, n), state values (B,)) of a feed-forward policy over one Discrete action, for
        observations of `group`'s bodies: what search at play time takes as priors and leaf values. ValueError for a
        policy without them (recurrent, continuous, a central critic)."""
        sig = self.sig_of[group]
        if self.recurrent or not self.policy.discrete[sig] or self.team is not None:
            raise ValueError("search over an agent's heads needs a feed-forward policy over one Discrete action with "
                             "its own critic")
        x = self._tensor(prepare_obs(obs, self.obs_norms[group], update=False))
        with torch.no_grad():
            out, v = self.policy.heads(x, sig)
            logits = out if mask is None else masked(out, mask)
            probs = torch.softmax(logits.reshape(len(x), -1), dim=-1).cpu().numpy()
        values = np.zeros(len(x), np.float32) if v is None else self._values(v.cpu().numpy())
        return probs, values

    def _advance(self, group: int, state: torch.Tensor | None,
                 acting: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Keep a recurrent policy's new states of the bodies that acted (`acting`; None: all); the states and
        episode-start flags they acted from."""
        hidden, fresh = self.hidden[group], self.fresh[group]
        if state is None:
            return hidden, fresh
        before, was = hidden.copy(), fresh.copy()
        rows = slice(None) if acting is None else acting
        hidden[rows] = state.cpu().numpy()[rows]
        fresh[rows] = False
        return before, was

    def episodes_ended(self, group: int, rows: np.ndarray) -> None:
        """A recurrent policy forgets the bodies `rows` whose episode ended: their next step starts from zero."""
        if self.recurrent and rows.any():
            self.hidden[group][rows] = 0.0
            self.fresh[group][rows] = True

    def update(self, group: int, transition: Transition) -> None:
        """Add the step to the group's rollout; learn once every active group's rollout is full; forget the
        recurrent states of the bodies whose episode ended."""
        super().update(group, transition)
        if self.training and self.active[group]:
            self._store(group, transition)
        if self.recurrent:
            done = transition.done
            self.episodes_ended(group, done if transition.completed is None else done & transition.completed)

    def _store(self, group: int, transition: Transition) -> None:
        """Add the step's transition to the group's rollout (bootstrapping time-limit cuts); learn when full."""
        mem = self.memories[group]
        if mem.full:
            self._train()
        sig = self.sig_of[group]
        norm = self.obs_norms[group]
        obs = prepare_obs(transition.obs, norm, update=False)
        pending = self.pending[group]
        self.pending[group] = None
        decision = self.decisions[group]
        if decision is not None:
            pending = Pending(transition.action, decision.logp.copy(), decision.value.copy(), decision.state,
                              decision.start)  # the state rows are copied into the rollout below, not kept
        elif pending is None:
            pending = self._evaluate_taken(group, obs, transition.action, sig)
        action, logp, value, state, start = pending
        if self.recurrent and transition.completed is not None:  # a row of no step: the state its next step takes
            state = np.where(transition.completed[:, None], state, self.hidden[group])
            start = np.where(transition.completed, start, self.fresh[group])
        team = self.team
        view = None if team is None else team.team_now[group]
        if team is not None and view is not None:  # a central critic: the team's reward, the joint obs once a step
            reward = np.full(len(transition.reward), view.team_reward(team.teams[group].reward_rows), np.float32)
            team.joint[group][mem.pos] = team.take_acted(group, view)
        else:
            reward = transition.reward.astype(np.float32)
        done = transition.terminated | transition.truncated
        scaler = self.rew_scalers[group]
        if scaler is not None:
            reward = scaler(reward, done)
        cut = transition.truncated & ~transition.terminated
        if self.uses_critic and cut.any():
            with torch.no_grad():
                if team is not None and view is not None:
                    x = team.input(group, team.prepare(group, view.bootstrap_obs())[None])
                    final_v = self._values(self.policy.value(x, self.critic_of[group], self._now(group)).cpu().numpy())
                else:
                    final = prepare_obs(transition.final_obs, norm, update=False)
                    final_v = self._values(self.policy.value(self._tensor(final), sig, self._now(group)).cpu().numpy())
            reward = bootstrap_truncated(reward, transition.terminated, transition.truncated, final_v,
                                         self.config.gamma).astype(np.float32)
        next_obs = prepare_obs(transition.next_obs, norm, update=False)
        ends = transition.terminated if self.through_truncation else done
        mem.add(obs, action, reward, ends, value, logp, next_obs, transition.completed, transition.action_mask,
                state, start)
        if team is not None and view is not None and mem.full:
            team.last[group][...] = team.prepare(group, view.next_obs)
        if mem.full and all(m.full for m, on in zip(self.memories, self.active) if on):
            self._train()

    def _evaluate_taken(self, group: int, obs: np.ndarray, action: np.ndarray, sig: int) -> "Pending":
        """Log-probs and values of actions that were not chosen through `act` (e.g. given by the lab); a recurrent
        policy evaluates them from its bodies' states and keeps those states (it did not act)."""
        cx = None
        if self.team is not None and self.team.team_now[group] is not None:
            cx = self.team.now(group)
        x = self._tensor(obs)
        if self.recurrent:
            x, cx = x[None], None if cx is None else cx[None]
        with torch.no_grad():
            logp, _, v = self.policy.evaluate(x, self._tensor(np.asarray(action)), sig, False, None, cx,
                                              self.critic_of[group] if cx is not None else 0, self._now(group))
        v_np = np.zeros(len(obs), np.float32) if v is None else self._values(v.cpu().numpy())
        return Pending(np.asarray(action), logp.cpu().numpy(), v_np, self.hidden[group].copy(),
                       self.fresh[group].copy())

    def _now(self, group: int) -> Seq | None:
        """A recurrent policy's states of the group's bodies now (None for a feed-forward one)."""
        return Seq(self._tensor(self.hidden[group])) if self.recurrent else None

    def group_finished(self, group: int) -> None:
        """Stop waiting for a group whose env is done; learn from the others if they are ready."""
        self.active[group] = False
        self.memories[group].reset()
        if any(self.active) and all(m.full for m, on in zip(self.memories, self.active) if on):
            self._train()

    def _train(self) -> None:
        """Turn every full rollout into tensors with advantages, learn from them, and empty the rollouts."""
        rollouts = []
        for g, mem in enumerate(self.memories):
            if not (self.active[g] and mem.full):
                continue
            sig = self.sig_of[g]
            team = self.team
            with torch.no_grad():
                if team is not None:
                    last_v = self.policy.value(team.input(g, team.last[g][None]),
                                               self.critic_of[g], self._now(g)).cpu().numpy()
                else:
                    last_v = self.policy.value(self._tensor(mem.last_obs), sig, self._now(g)).cpu().numpy()
            adv, ret = self.advantages(mem, self._values(last_v))
            values, ret = self._critic_targets(mem, ret)
            if self.recurrent:
                if mem.valid is None or mem.valid.any():
                    rollouts.append(self._sequences(g, mem, adv, ret, values))
                continue
            T, N = mem.rewards.shape
            flat = T * N
            keep = slice(None) if mem.valid is None else mem.valid.reshape(flat)
            if mem.valid is not None and not mem.valid.any():
                continue
            rollouts.append(Rollout(
                sig, self._tensor(mem.obs.reshape((flat,) + mem.obs.shape[2:])[keep]),
                self._tensor(mem.actions.reshape((flat,) + mem.actions.shape[2:])[keep]),
                self._tensor(mem.logps.reshape(flat)[keep]), self._tensor(values.reshape(flat)[keep]),
                self._tensor(adv.reshape(flat)[keep]), self._tensor(ret.reshape(flat)[keep]),
                None if mem.masks is None else self._tensor(mem.masks.reshape(flat, -1)[keep]),
                None if team is None else self._keep(team.input(g, team.joint[g]), mem.valid),
                self.critic_of[g] if team is not None else 0))
        if rollouts:
            self.optim.set_frame(self.frame)
            self.learn(rollouts)
        for g, mem in enumerate(self.memories):
            if mem.full:
                mem.reset()

    def _sequences(self, g: int, mem: OnPolicyBatch, adv: np.ndarray, ret: np.ndarray, values: np.ndarray) -> Rollout:
        """A full rollout of a recurrent policy as sequences, each from its stored state: a body's steps (its own
        turns only) cut where an episode starts and every `seq_len` steps (and, with turns, after its first step),
        padded to one length; the flat fields
        hold the steps, step-major as the policy unrolls them (Rollout.columns takes some sequences)."""
        T, N = mem.rewards.shape
        assert mem.states is not None and mem.starts is not None  # add_states: a recurrent policy's memory
        held = np.ones((T, N), bool) if mem.valid is None else mem.valid
        body, t = np.nonzero(held.T)  # body-major: each body's steps in time order
        L = self.seq_len or T
        first = np.ones(len(t), bool)
        first[1:] = (body[1:] != body[:-1]) | mem.starts[t[1:], body[1:]]
        if mem.valid is not None:  # turns: a body's first step may be a move chosen before the last training step,
            first[1:] |= first[:-1] & (body[1:] == body[:-1])  # its later states not: they start from their own
        begin = np.maximum.accumulate(np.where(first, np.arange(len(t)), 0))
        cut = first | ((np.arange(len(t)) - begin) % L == 0)
        seg = np.cumsum(cut) - 1
        pos = np.arange(len(t)) - np.flatnonzero(cut)[seg]
        lengths = np.bincount(seg)
        where = np.full((int(lengths.max()), len(lengths)), -1, np.int64)
        where[pos, seg] = t * N + body  # each held step's row in the (T * N) rollout
        held_rows = where >= 0
        order = where[held_rows]  # step-major over the sequences: the flat fields' order
        row_of = np.full(where.shape, -1, np.int64)
        row_of[held_rows] = np.arange(len(order))
        pick = np.maximum(where, 0)

        def flat(a: np.ndarray) -> torch.Tensor:
            return self._tensor(a.reshape((T * N,) + a.shape[2:])[order])

        starts_at = np.flatnonzero(cut)
        state0 = mem.states[t[starts_at], body[starts_at]]
        team = self.team
        critic_obs = None
        if team is not None:
            joint = team.input(g, team.joint[g])  # (T * N, width), the rollout's row order
            critic_obs = joint[self._tensor(pick).reshape(-1)].reshape(pick.shape + (-1,))
        obs = mem.obs.reshape((T * N,) + mem.obs.shape[2:])[pick]
        return Rollout(self.sig_of[g], self._tensor(obs), flat(mem.actions), flat(mem.logps), flat(values),
                       flat(adv), flat(ret), None if mem.masks is None else flat(mem.masks), critic_obs,
                       self.critic_of[g] if team is not None else 0,
                       Seq(self._tensor(state0), self._tensor(lengths)), self._tensor(row_of))

    def _values(self, v: np.ndarray) -> np.ndarray:
        """A critic's outputs as values: de-standardised with `value_norm` (its outputs are standardised returns)."""
        norm = self.value_norm
        if norm is None:
            return v
        return (v * np.sqrt(norm.var + 1e-8) + norm.mean).astype(np.float32)

    def _critic_targets(self, mem: OnPolicyBatch, ret: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rollout's values and returns as the critic learns them: with `value_norm` (MAPPO's value
        normalisation), the running statistics take the rollout's returns first and both are standardised by them."""
        norm = self.value_norm
        if norm is None:
            return mem.values, ret
        norm.update((ret if mem.valid is None else ret[mem.valid]).reshape(-1).astype(np.float64))
        scale = np.sqrt(norm.var + 1e-8)
        return ((mem.values - norm.mean) / scale).astype(np.float32), ((ret - norm.mean) / scale).astype(np.float32)

    @staticmethod
    def _keep(x: torch.Tensor, valid: np.ndarray | None) -> torch.Tensor:
        """The rows of a flattened (steps * bodies, ...) tensor that hold a transition."""
        return x if valid is None else x[torch.as_tensor(valid.reshape(-1), device=x.device)]

    @abstractmethod
    def advantages(self, mem: OnPolicyBatch, last_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(advantages, value targets), each (n_steps, bodies), from a full rollout."""

    @abstractmethod
    def learn(self, rollouts: list[Rollout]) -> None:
        """Optimise on the rollouts; update last_loss and opt_step."""

    @staticmethod
    def explained_variance(rollouts: list[Rollout]) -> float:
        """How much of the rollouts' returns the critic's values explain (1 is all; nan without a critic)."""
        return float(explained_variance(torch.cat([r.values for r in rollouts]), torch.cat([r.returns for r in rollouts])))

    def _normalize(self, adv: torch.Tensor) -> torch.Tensor:
        if self.config.normalize_advantage and adv.numel() > 1:
            return (adv - adv.mean()) / (adv.std() + 1e-8)
        return adv

    def state_dict(self) -> dict[str, Any]:
        """Policy, optimiser, normalisers, random generators, frame and opt_step (schedules follow frame)."""
        state = super().state_dict()
        state.update(
            policy=self.policy.state_dict(), optim=self.optim.state_dict(), gen=self.gen.get_state(),
            rng=self.rng.bit_generator.state,
            obs_norms=[n.state_dict() if n else None for n in self.obs_norms],
            rew_scalers=[s.state_dict() if s else None for s in self.rew_scalers])
        if self.team is not None:
            state["team_norms"] = self.team.state_dict()
        if self.value_norm is not None:
            state["value_norm"] = self.value_norm.state_dict()
        if self.recurrent:
            state.update(hidden=[torch.tensor(h) for h in self.hidden], fresh=[torch.tensor(f) for f in self.fresh])
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state_dict; partly collected rollouts are dropped."""
        super().load_state_dict(state)
        self.policy.load_state_dict(state["policy"])
        self.optim.load_state_dict(state["optim"])
        restore_generator(self.gen, state["gen"])
        self.rng.bit_generator.state = state["rng"]
        for n, s in zip(self.obs_norms, state["obs_norms"]):
            if n is not None and s is not None:
                n.load_state_dict(s)
        for scaler, s in zip(self.rew_scalers, state["rew_scalers"]):
            if scaler is not None and s is not None:
                scaler.load_state_dict(s)
        if self.team is not None and "team_norms" in state:
            self.team.load_state_dict(state["team_norms"])
        if self.value_norm is not None and "value_norm" in state:
            self.value_norm.load_state_dict(state["value_norm"])
        for mine, theirs in ((self.hidden, state.get("hidden", ())), (self.fresh, state.get("fresh", ()))):
            for now, saved in zip(mine, theirs):
                if tuple(saved.shape) == now.shape:
                    now[...] = saved.numpy()
        for mem in self.memories:
            mem.reset()
        self.pending = [None] * len(self.groups)
