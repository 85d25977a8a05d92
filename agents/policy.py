"""Actor-critic policy over one or many signatures: factored categorical for Discrete, MultiDiscrete and
MultiBinary actions (one categorical per component, log-probs and entropies summed; a MultiBinary is a
MultiDiscrete of 2s), diagonal Gaussian for Box actions."""
# No `from __future__ import annotations` here: classes of this module are subclassed or built elsewhere (dataclass
# and NamedTuple __init__ methods), and string annotations would then resolve only in this module's namespace, not
# where the API reference and typing.get_type_hints read them.

import math
from dataclasses import dataclass
from typing import Literal, NamedTuple, Sequence, overload

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from slm_lab_like.agents.common import build_net
from slm_lab_like.agents.explore import masked
from slm_lab_like.agents.net.base import NetConfig
from slm_lab_like.agents.net.linear import log_softmax_rows
from slm_lab_like.agents.net.recurrent import Seq

LOG_2PI = math.log(2 * math.pi)
PAD_LOGIT = -1e9


@dataclass(frozen=True)
class ActionLayout:
    """How a policy head parametrises an action space and how its actions are stored.

    `nvec`: categories of each categorical component in storage order (None: a Gaussian over a Box);
    `width`: the policy head's output width; `shape`, `dtype`: one body's stored action.
    """

    nvec: tuple[int, ...] | None
    width: int
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def discrete(self) -> bool:
        return self.nvec is not None


def action_layout(space: gym.Space) -> ActionLayout:
    """The ActionLayout of a Discrete, MultiDiscrete, MultiBinary or Box action space."""
    if isinstance(space, gym.spaces.Discrete):
        return ActionLayout((int(space.n),), int(space.n), (), np.dtype(np.int64))
    if isinstance(space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        nvec = (tuple(int(n) for n in space.nvec.ravel()) if isinstance(space, gym.spaces.MultiDiscrete)
                else (2,) * int(np.prod(space.shape)))
        return ActionLayout(nvec, sum(nvec), tuple(space.shape), np.dtype(np.int64))
    if isinstance(space, gym.spaces.Box):
        return ActionLayout(None, int(np.prod(space.shape)), tuple(space.shape), np.dtype(np.float32))
    raise ValueError(f"action space {space} is not supported; use Discrete, MultiDiscrete, MultiBinary or Box")


class Acted(NamedTuple):
    """What `ActorCritic.act` gives: actions as stored, their log-probs, the state values, and a recurrent
    policy's states after the step (None for feed-forward nets)."""

    actions: np.ndarray
    logps: np.ndarray
    values: np.ndarray
    state: torch.Tensor | None


class ActorCritic(nn.Module):
    """Actor (and critic, unless `critic` is False) nets, separate or sharing a body (`net.shared`).

    With `critic_spaces` the critic is central (agents.critic): its own net over those input spaces (one per
    critic signature `csig`), never sharing the actor's body; its input `critic_x` is passed beside the actor's
    observations, and `value` takes the critic's input.
    """

    def __init__(self, net_cls: type, config: NetConfig, sigs: Sequence[tuple[gym.Space, gym.Space]],
                 critic: bool = True, log_std_init: float = 0.0,
                 critic_spaces: Sequence[gym.Space] | None = None) -> None:
        super().__init__()
        self.layouts = [action_layout(a) for _, a in sigs]
        self.discrete = [lay.discrete for lay in self.layouts]
        self.env_dtypes = [a.dtype for _, a in sigs]
        obs_spaces = [o for o, _ in sigs]
        widths = [lay.width for lay in self.layouts]
        self.has_critic = critic
        self.central = critic and critic_spaces is not None
        self.shared = config.shared and critic and not self.central
        if self.shared:
            self.net = build_net(net_cls, config, obs_spaces, [[w, 1] for w in widths], [0.01, 1.0])
        else:
            self.actor = build_net(net_cls, config, obs_spaces, [[w] for w in widths], [0.01])
            if self.central and critic_spaces is not None:
                self.critic = build_net(net_cls, config, list(critic_spaces), [[1] for _ in critic_spaces], [1.0])
            elif critic:
                self.critic = build_net(net_cls, config, obs_spaces, [[1] for _ in widths], [1.0])
        self.log_std = nn.ParameterList(
            nn.Parameter(torch.full((w,), log_std_init)) for w, d in zip(widths, self.discrete) if not d)
        self.log_std_index = list(np.cumsum([not d for d in self.discrete]) - 1)
        # a signature that is not discrete is a Box (action_layout)
        lows = [np.asarray(a.low, np.float32) if isinstance(a, gym.spaces.Box) else None for _, a in sigs]
        highs = [np.asarray(a.high, np.float32) if isinstance(a, gym.spaces.Box) else None for _, a in sigs]
        self.bounds = list(zip(lows, highs))
        self.padded = [lay.nvec is not None and len(set(lay.nvec)) > 1 for lay in self.layouts]
        self.components = [None if lay.nvec is None else (len(lay.nvec), max(lay.nvec)) for lay in self.layouts]
        self.stored_shapes = [(-1,) + lay.shape for lay in self.layouts]
        self.recurrent = bool(getattr(net_cls, "recurrent", False))
        self.obs_ndims = [len(o.shape or ()) for o in obs_spaces]
        nets = [self.net] if self.shared else [self.actor] + ([self.critic] if critic else [])
        self.state_sizes = [int(getattr(n, "state_size", 0)) for n in nets]
        for sig, lay in enumerate(self.layouts):
            if self.padded[sig] and lay.nvec is not None:  # padded: categorical components of several sizes
                self._register_padding(sig, lay.nvec)

    def _register_padding(self, sig: int, nvec: tuple[int, ...]) -> None:
        """Index of each (component, category) into the flat logits, and which slots pad short components."""
        starts = np.concatenate([[0], np.cumsum(nvec)[:-1]])
        cats = np.arange(max(nvec))
        self.register_buffer(f"pad_index_{sig}", torch.as_tensor(
            np.minimum(starts[:, None] + cats, starts[:, None] + np.asarray(nvec)[:, None] - 1)), persistent=False)
        self.register_buffer(f"pad_mask_{sig}", torch.as_tensor(cats[None, :] >= np.asarray(nvec)[:, None]),
                             persistent=False)

    def _flat_logits(self, out: torch.Tensor, sig: int) -> torch.Tensor:
        """Logits (B, sum(nvec)) as (B * components, max categories), one row per categorical component; short
        components are padded with -1e9 (zero probability). Discrete actions pass through as they are."""
        if self.padded[sig]:
            out = out[:, getattr(self, f"pad_index_{sig}")].masked_fill(getattr(self, f"pad_mask_{sig}"), PAD_LOGIT)
        components = self.components[sig]
        assert components is not None  # a discrete signature's categorical components
        k, m = components
        return out if k == 1 else out.reshape(-1, m)

    @property
    def state_size(self) -> int:
        """The width of one body's recurrent state (its nets' states side by side); 0 for feed-forward nets."""
        return sum(self.state_sizes)

    def heads(self, x: torch.Tensor, sig: int, need_value: bool = True, critic_x: torch.Tensor | None = None,
              csig: int = 0, seq: Seq | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Policy output (logits or mean) and value (None without a critic or when not needed; a central critic's
        value needs its input `critic_x`, of critic signature `csig`). Recurrent nets take `seq` (see `unroll`)."""
        out, v, _ = self.unroll(x, sig, need_value, critic_x, csig, seq)
        return out, v

    def unroll(self, x: torch.Tensor, sig: int, need_value: bool = True, critic_x: torch.Tensor | None = None,
               csig: int = 0, seq: Seq | None = None) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """heads' outputs and the recurrent state after the last step (None for feed-forward nets). A recurrent
        policy takes observations (T, B, ...) (or (B, ...): one step) with `seq`, the states before them, and gives
        a row per step held, step-major (see Recurrent.unroll)."""
        if not self.recurrent:
            return *self._heads(x, sig, need_value, critic_x, csig), None
        assert seq is not None, "a recurrent policy takes the states of its bodies"
        one_step = x.dim() == 1 + self.obs_ndims[sig]  # (B, ...): one step
        x = x[None] if one_step else x
        critic_x = critic_x[None] if one_step and critic_x is not None else critic_x
        parts = torch.split(seq.state, self.state_sizes, dim=1)
        if self.shared:
            (out, v), state = self.net.unroll(x, sig, seq._replace(state=parts[0]))
            v = v.squeeze(-1)
        else:
            (out,), state = self.actor.unroll(x, sig, seq._replace(state=parts[0]))
            v = None
            if self.has_critic and need_value and (critic_x is not None or not self.central):
                (v,), cstate = self.critic.unroll(critic_x if self.central else x, csig if self.central else sig,
                                                  seq._replace(state=parts[1]))
                v = v.squeeze(-1)
                state = torch.cat([state, cstate], dim=1)
            elif self.has_critic:
                state = torch.cat([state, parts[1]], dim=1)
        return out, v, state

    def _heads(self, x: torch.Tensor, sig: int, need_value: bool, critic_x: torch.Tensor | None,
               csig: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.shared:
            out, v = self.net(x, sig)
            return out, v.squeeze(-1)
        out = self.actor(x, sig)[0]
        if not (self.has_critic and need_value):
            return out, None
        if self.central:
            return out, None if critic_x is None else self.critic(critic_x, csig)[0].squeeze(-1)
        return out, self.critic(x, sig)[0].squeeze(-1)

    def value(self, x: torch.Tensor, sig: int, seq: Seq | None = None) -> torch.Tensor:
        """State values (zeros without a critic); with a central critic `x` is its input and `sig` its csig.
        A recurrent critic takes one step (B, ...) from the states `seq` holds."""
        if not self.has_critic:
            return torch.zeros(x.shape[0], device=x.device)
        if self.recurrent:
            assert seq is not None, "a recurrent critic takes the states of its bodies"
            parts = torch.split(seq.state, self.state_sizes, dim=1)
            if self.shared:
                return self.net.unroll(x[None], sig, Seq(parts[0]))[0][1].squeeze(-1)
            return self.critic.unroll(x[None], sig, Seq(parts[1]))[0][0].squeeze(-1)
        if self.shared:
            return self.net(x, sig)[1].squeeze(-1)
        return self.critic(x, sig)[0].squeeze(-1)

    def act(self, x: torch.Tensor, sig: int, deterministic: bool, rng: np.random.Generator,
            mask: np.ndarray | None = None, critic_x: torch.Tensor | None = None,
            csig: int = 0, seq: Seq | None = None) -> Acted:
        """Sampled (or greedy/mean) actions, their log-probs and the state values, as numpy arrays; with a
        legal-action `mask` (Discrete actions) only legal actions get probability. A central critic's values
        need `critic_x` (zeros without it). A recurrent policy acts from the states in `seq` and gives the states
        after this step.

        Sampling runs in numpy on the small (bodies * components, categories) arrays: fewer tensor ops per step
        than torch's distributions.
        """
        with torch.no_grad():
            out, v, state = self.unroll(x, sig, True, critic_x, csig, seq)
            if self.discrete[sig]:
                out = log_softmax_rows(self._flat_logits(out if mask is None else masked(out, mask), sig))
        out_np = out.cpu().numpy()
        v_np = np.zeros(len(x), np.float32) if v is None else v.cpu().numpy()
        shape = self.stored_shapes[sig]
        if self.discrete[sig]:
            if deterministic:
                a = out_np.argmax(axis=1)
            else:
                cum = np.exp(out_np).cumsum(axis=1)
                u = rng.random((len(cum), 1), dtype=np.float32) * cum[:, -1:]
                a = (u > cum).sum(axis=1)  # <= the last category with probability: u < the row's total
            logp = out_np[np.arange(len(a)), a]
            components = self.components[sig]
            assert components is not None  # a discrete signature's categorical components
            k = components[0]
            return Acted(a.reshape(shape), (logp if k == 1 else logp.reshape(-1, k).sum(axis=1)), v_np, state)
        log_std = self.log_std[self.log_std_index[sig]].detach().cpu().numpy()
        if deterministic:
            a = out_np
            logp = (-log_std - 0.5 * LOG_2PI).sum() * np.ones(len(a), np.float32)
        else:
            z = rng.standard_normal(out_np.shape, dtype=np.float32)
            a = out_np + np.exp(log_std) * z
            logp = (-0.5 * z * z - log_std - 0.5 * LOG_2PI).sum(axis=1).astype(np.float32)
        return Acted(a.reshape(shape), logp, v_np, state)

    @staticmethod
    def _gauss_logp(mean: torch.Tensor, log_std: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        z = (a - mean) * torch.exp(-log_std)
        return (-0.5 * z.pow(2) - log_std - 0.5 * LOG_2PI).sum(-1)

    @overload
    def evaluate(self, x: torch.Tensor, actions: torch.Tensor, sig: int, need_entropy: Literal[True] = True,
                 mask: torch.Tensor | None = None, critic_x: torch.Tensor | None = None,
                 csig: int = 0, seq: Seq | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]: ...

    @overload
    def evaluate(self, x: torch.Tensor, actions: torch.Tensor, sig: int, need_entropy: bool,
                 mask: torch.Tensor | None = None, critic_x: torch.Tensor | None = None,
                 csig: int = 0, seq: Seq | None = None) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]: ...

    def evaluate(self, x: torch.Tensor, actions: torch.Tensor, sig: int, need_entropy: bool = True,
                 mask: torch.Tensor | None = None, critic_x: torch.Tensor | None = None,
                 csig: int = 0, seq: Seq | None = None) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Log-probs of given actions, their entropies (None unless needed) and values (None without a critic,
        or a central one without `critic_x`); `mask`: the legal actions at each observation (Discrete actions).
        A recurrent policy unrolls sequences (T, B, ...) from `seq`; actions and masks are then a row per step
        held, step-major."""
        out, v = self.heads(x, sig, True, critic_x, csig, seq)
        if self.discrete[sig]:
            logp_all = log_softmax_rows(self._flat_logits(out if mask is None else masked(out, mask), sig))
            logp = logp_all.gather(1, actions.long().reshape(-1, 1)).view(len(out), -1).sum(1)
            entropy = -(logp_all.exp() * logp_all).sum(-1).view(len(out), -1).sum(1) if need_entropy else None
            return logp, entropy, v
        log_std = self.log_std[self.log_std_index[sig]]
        a = actions.reshape(out.shape)
        entropy = (log_std + 0.5 * (1.0 + LOG_2PI)).sum().expand(out.shape[0]) if need_entropy else None
        return self._gauss_logp(out, log_std, a), entropy, v

    def env_action(self, a: np.ndarray, sig: int) -> np.ndarray:
        """Actions as the env takes them: categorical ones in the space's dtype, Box ones clipped to its bounds."""
        if self.discrete[sig]:
            return a.astype(self.env_dtypes[sig], copy=False)
        low, high = self.bounds[sig]
        return np.clip(a, low, high)
