"""Actor-critic policy over one or many signatures: categorical for Discrete, diagonal Gaussian for Box actions."""
from __future__ import annotations

import math
from typing import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from agents.common import build_net, obs_shape
from agents.explore import masked
from agents.net.base import NetConfig

LOG_2PI = math.log(2 * math.pi)


def action_layout(space: gym.Space) -> tuple[bool, int, tuple[int, ...], np.dtype]:
    """(discrete, policy output width, stored action shape, stored dtype) of an action space."""
    if isinstance(space, gym.spaces.Discrete):
        return True, int(space.n), (), np.dtype(np.int64)
    if isinstance(space, gym.spaces.Box):
        return False, int(np.prod(space.shape)), tuple(space.shape), np.dtype(np.float32)
    raise ValueError(f"action space {space} is not supported; use Discrete or Box")


class ActorCritic(nn.Module):
    """Actor (and critic, unless `critic` is False) nets, separate or sharing a body (`net.shared`)."""

    def __init__(self, net_cls: type, config: NetConfig, sigs: Sequence[tuple[gym.Space, gym.Space]],
                 critic: bool = True, log_std_init: float = 0.0) -> None:
        super().__init__()
        layouts = [action_layout(a) for _, a in sigs]
        self.discrete = [lay[0] for lay in layouts]
        self.act_shapes = [lay[2] for lay in layouts]
        in_shapes = [obs_shape(o) for o, _ in sigs]
        widths = [lay[1] for lay in layouts]
        self.has_critic = critic
        self.shared = config.shared and critic
        if self.shared:
            self.net = build_net(net_cls, config, in_shapes, [[w, 1] for w in widths], [0.01, 1.0])
        else:
            self.actor = build_net(net_cls, config, in_shapes, [[w] for w in widths], [0.01])
            if critic:
                self.critic = build_net(net_cls, config, in_shapes, [[1] for _ in widths], [1.0])
        self.log_std = nn.ParameterList(
            nn.Parameter(torch.full((w,), log_std_init)) for w, d in zip(widths, self.discrete) if not d)
        self.log_std_index = list(np.cumsum([not d for d in self.discrete]) - 1)
        lows = [np.asarray(a.low, np.float32) if not d else None for (_, a), d in zip(sigs, self.discrete)]
        highs = [np.asarray(a.high, np.float32) if not d else None for (_, a), d in zip(sigs, self.discrete)]
        self.bounds = list(zip(lows, highs))

    def heads(self, x: torch.Tensor, sig: int, need_value: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Policy output (logits or mean) and value (None without a critic or when not needed)."""
        if self.shared:
            out, v = self.net(x, sig)
            return out, v.squeeze(-1)
        out = self.actor(x, sig)[0]
        if not (self.has_critic and need_value):
            return out, None
        return out, self.critic(x, sig)[0].squeeze(-1)

    def value(self, x: torch.Tensor, sig: int) -> torch.Tensor:
        """State values (zeros without a critic)."""
        if not self.has_critic:
            return torch.zeros(x.shape[0], device=x.device)
        if self.shared:
            return self.net(x, sig)[1].squeeze(-1)
        return self.critic(x, sig)[0].squeeze(-1)

    def act(self, x: torch.Tensor, sig: int, deterministic: bool, rng: np.random.Generator,
            mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sampled (or greedy/mean) actions, their log-probs and the state values, as numpy arrays; with a
        legal-action `mask` (Discrete actions) only legal actions get probability.

        Sampling runs in numpy on the small (bodies, actions) arrays: fewer tensor ops per step than torch's.
        """
        with torch.no_grad():
            out, v = self.heads(x, sig)
            if self.discrete[sig]:
                out = torch.log_softmax(out if mask is None else masked(out, mask), dim=-1)
        out_np = out.cpu().numpy()
        v_np = np.zeros(len(out_np), np.float32) if v is None else v.cpu().numpy()
        if self.discrete[sig]:
            if deterministic:
                a = out_np.argmax(axis=1)
            else:
                cum = np.exp(out_np).cumsum(axis=1)
                u = rng.random((len(cum), 1), dtype=np.float32) * cum[:, -1:]
                a = np.minimum((u > cum).sum(axis=1), cum.shape[1] - 1)
            return a, out_np[np.arange(len(a)), a], v_np
        log_std = self.log_std[self.log_std_index[sig]].detach().cpu().numpy()
        if deterministic:
            a = out_np
            logp = (-log_std - 0.5 * LOG_2PI).sum() * np.ones(len(a), np.float32)
        else:
            z = rng.standard_normal(out_np.shape, dtype=np.float32)
            a = out_np + np.exp(log_std) * z
            logp = (-0.5 * z * z - log_std - 0.5 * LOG_2PI).sum(axis=1).astype(np.float32)
        return a.reshape((-1,) + self.act_shapes[sig]), logp, v_np

    @staticmethod
    def _gauss_logp(mean: torch.Tensor, log_std: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        z = (a - mean) * torch.exp(-log_std)
        return (-0.5 * z.pow(2) - log_std - 0.5 * LOG_2PI).sum(-1)

    def evaluate(self, x: torch.Tensor, actions: torch.Tensor, sig: int, need_entropy: bool = True,
                 mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Log-probs of given actions, their entropies (None unless needed) and values (None without a critic);
        `mask`: the legal actions at each observation (Discrete actions)."""
        out, v = self.heads(x, sig)
        if self.discrete[sig]:
            logp_all = torch.log_softmax(out if mask is None else masked(out, mask), dim=-1)
            logp = logp_all.gather(1, actions.long().unsqueeze(1)).squeeze(1)
            entropy = -(logp_all.exp() * logp_all).sum(-1) if need_entropy else None
            return logp, entropy, v
        log_std = self.log_std[self.log_std_index[sig]]
        a = actions.reshape(out.shape)
        entropy = (log_std + 0.5 * (1.0 + LOG_2PI)).sum().expand(out.shape[0]) if need_entropy else None
        return self._gauss_logp(out, log_std, a), entropy, v

    def env_action(self, a: np.ndarray, sig: int) -> np.ndarray:
        """Actions as the env takes them: Box actions clipped to the space's bounds."""
        if self.discrete[sig]:
            return a
        low, high = self.bounds[sig]
        return np.clip(a, low, high)
