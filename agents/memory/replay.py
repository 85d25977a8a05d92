"""Replay memories for off-policy learning, batched over bodies: uniform and prioritized (sum tree)."""
# No `from __future__ import annotations` here: classes of this module are subclassed or built elsewhere (dataclass
# and NamedTuple __init__ methods), and string annotations would then resolve only in this module's namespace, not
# where the API reference and typing.get_type_hints read them.

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import DTypeLike
import torch

from slm_lab_like.agents.schedule import Schedule, value_at


@dataclass
class ReplayConfig:
    """Ring buffer of `capacity` transitions; `batch_size` transitions per sample. `combined`: combined experience
    replay (Zhang and Sutton 2017, SLM Lab's use_cer): the last rows of each batch are the transitions added since
    the previous batch (at most batch_size), so every transition is learnt from at least once."""

    capacity: int = field(default=100000, metadata={"min": 1})
    batch_size: int = field(default=64, metadata={"min": 1})
    combined: bool = False


class ReplayBatch(NamedTuple):
    """A sampled batch; `weights` are importance weights (ones for uniform replay)."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    weights: np.ndarray
    indices: np.ndarray
    next_mask: np.ndarray | None = None
    discounts: np.ndarray | None = None


class Replay:
    """Uniform experience replay; each add writes one row per body into a preallocated ring."""

    Config = ReplayConfig

    def __init__(self, config: ReplayConfig, num_bodies: int, obs_shape: tuple[int, ...], obs_dtype: np.dtype,
                 act_shape: tuple[int, ...], act_dtype: np.dtype, seed: int = 0) -> None:
        self.config = config
        self.capacity = config.capacity
        self.batch_size = config.batch_size
        self.num_bodies = num_bodies
        self.obs = np.zeros((self.capacity,) + tuple(obs_shape), obs_dtype)
        self.next_obs = np.zeros_like(self.obs)
        self.actions = np.zeros((self.capacity,) + tuple(act_shape), act_dtype)
        self.rewards = np.zeros(self.capacity, np.float32)
        self.terminated = np.zeros(self.capacity, np.float32)
        self.next_mask: np.ndarray | None = None
        self.discounts: np.ndarray | None = None
        self.pos = 0
        self.size = 0
        self.fresh = 0  # transitions added since the last batch (combined replay)
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def add(self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray, next_obs: np.ndarray,
            terminated: np.ndarray, next_mask: np.ndarray | None = None,
            discounts: np.ndarray | None = None) -> np.ndarray:
        """Store one transition per row (next_obs = the true next obs, final_obs on episode end; next_mask =
        the legal actions at next_obs, when the env has masks; discounts = the factor of each row's bootstrap
        value, gamma**k for a k-step return, when the rows come from an NStepAccumulator); returns slots. Of more
        rows than the ring holds (bodies beyond its capacity) only the last `capacity` are stored, as a ring
        written row by row would keep them."""
        if len(reward) > self.capacity:
            keep = slice(len(reward) - self.capacity, None)
            obs, action, reward, next_obs, terminated = obs[keep], action[keep], reward[keep], next_obs[keep], \
                terminated[keep]
            next_mask = None if next_mask is None else next_mask[keep]
            discounts = None if discounts is None else discounts[keep]
        n = len(reward)
        idx = (self.pos + np.arange(n)) % self.capacity
        self.obs[idx] = obs
        self.actions[idx] = action
        self.rewards[idx] = reward
        self.next_obs[idx] = next_obs
        self.terminated[idx] = terminated
        if next_mask is not None:
            if self.next_mask is None:
                self.next_mask = np.ones((self.capacity,) + next_mask.shape[1:], bool)
            self.next_mask[idx] = next_mask
        if discounts is not None:
            if self.discounts is None:
                self.discounts = np.ones(self.capacity, np.float32)
            self.discounts[idx] = discounts
        self.pos = (self.pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        self.fresh = min(self.fresh + n, self.capacity)
        return idx

    def _combine(self, idx: np.ndarray) -> np.ndarray:
        """With combined replay, the batch's last rows replaced by the transitions added since the last batch."""
        if not self.config.combined:
            return idx
        k = min(self.fresh, len(idx), self.size)
        self.fresh = 0
        if k:
            idx = idx.copy()
            idx[-k:] = (self.pos - k + np.arange(k)) % self.capacity
        return idx

    def _gather(self, idx: np.ndarray, weights: np.ndarray) -> ReplayBatch:
        return ReplayBatch(self.obs[idx], self.actions[idx], self.rewards[idx], self.next_obs[idx],
                           self.terminated[idx], weights, idx,
                           None if self.next_mask is None else self.next_mask[idx],
                           None if self.discounts is None else self.discounts[idx])

    def sample(self, frame: int = 0, batch_size: int | None = None) -> ReplayBatch:
        """A uniform batch (with replacement) of stored transitions."""
        n = batch_size or self.batch_size
        idx = self._combine(self.rng.integers(0, self.size, n))
        return self._gather(idx, np.ones(n, np.float32))

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """No-op for uniform replay (prioritized replay overrides it)."""

    ARRAYS = ("obs", "next_obs", "actions", "rewards", "terminated", "next_mask", "discounts")

    def state_dict(self) -> dict[str, Any]:
        """The stored transitions as tensors (the filled part only), ring position, size and sampler state."""
        arrays = {k: torch.from_numpy(getattr(self, k)[:self.size].copy()) for k in self.ARRAYS
                  if getattr(self, k) is not None}
        return {"arrays": arrays, "pos": self.pos, "size": self.size, "fresh": self.fresh,
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what state_dict returned into this memory's (same-capacity) buffers."""
        size = int(state["size"])
        if size > self.capacity:
            raise ValueError(f"saved replay holds {size} transitions; this memory's capacity is {self.capacity}")
        for k, t in state["arrays"].items():
            if getattr(self, k) is None:
                setattr(self, k, np.ones((self.capacity,) + tuple(t.shape[1:]), t.numpy().dtype))
            getattr(self, k)[:size] = t.numpy()
        self.pos, self.size, self.fresh = int(state["pos"]), size, int(state.get("fresh", 0))
        self.rng.bit_generator.state = state["rng"]


class NStepRows(NamedTuple):
    """Finished n-step transitions, one per row: ready for Replay.add."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    discounts: np.ndarray
    next_mask: np.ndarray | None = None


class NStepAccumulator:
    """Turns each body's stream of 1-step transitions into n-step ones, one independent stream per body.

    A pending transition of body b (started at its step t) collects R = r_t + g r_{t+1} + ... + g^(k-1) r_{t+k-1}
    and is emitted when k reaches n (bootstrap from the obs after step t+n-1, discount g^n) or when b's episode
    ends first (every pending one is emitted with the k it has: bootstrap from the episode's true last obs,
    discount g^k, cut where the episode terminated and kept where it was only truncated). A body's stream is
    never mixed with another's, nor carried across an episode end.
    """

    def __init__(self, n: int, gamma: float, num_bodies: int, obs_shape: tuple[int, ...], obs_dtype: DTypeLike,
                 act_shape: tuple[int, ...] = (), act_dtype: DTypeLike = np.int64) -> None:
        if n < 1:
            raise ValueError(f"n-step needs n >= 1, got {n}")
        self.n, self.gamma, self.num_bodies = n, float(gamma), num_bodies
        self.obs = np.zeros((n, num_bodies) + tuple(obs_shape), obs_dtype)
        self.actions = np.zeros((n, num_bodies) + tuple(act_shape), act_dtype)
        self.returns = np.zeros((n, num_bodies), np.float64)
        self.steps = np.zeros((n, num_bodies), np.int64)
        self.valid = np.zeros((n, num_bodies), bool)
        self.pos = np.zeros(num_bodies, np.int64)
        self.all_rows = np.arange(num_bodies)

    def reset(self) -> None:
        """Drop every pending transition."""
        self.valid[:] = False
        self.pos[:] = 0

    def add(self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray, next_obs: np.ndarray,
            terminated: np.ndarray, truncated: np.ndarray, next_mask: np.ndarray | None = None,
            bodies: np.ndarray | None = None) -> NStepRows:
        """Take one step of the bodies `bodies` (all when None; row i of the arrays is body bodies[i]);
        next_obs is the true next obs (final_obs where the episode ended). Returns the transitions finished now."""
        rows = self.all_rows if bodies is None else np.asarray(bodies, np.int64)
        reward = np.asarray(reward, np.float64)
        valid = self.valid[:, rows]
        steps = self.steps[:, rows]
        self.returns[:, rows] += np.where(valid, self.gamma ** steps * reward[None, :], 0.0)
        self.steps[:, rows] = steps + valid
        slot = self.pos[rows]
        self.obs[slot, rows] = obs
        self.actions[slot, rows] = action
        self.returns[slot, rows] = reward
        self.steps[slot, rows] = 1
        self.valid[slot, rows] = True
        self.pos[rows] = (slot + 1) % self.n
        done = np.asarray(terminated, bool) | np.asarray(truncated, bool)
        valid = self.valid[:, rows]
        emit = valid & (done[None, :] | (self.steps[:, rows] >= self.n))
        slots, cols = np.nonzero(emit)
        bodies_out = rows[cols]
        steps_out = self.steps[slots, bodies_out]
        out = NStepRows(self.obs[slots, bodies_out], self.actions[slots, bodies_out],
                        self.returns[slots, bodies_out].astype(np.float32), next_obs[cols],
                        np.asarray(terminated, bool)[cols], (self.gamma ** steps_out).astype(np.float32),
                        None if next_mask is None else next_mask[cols])
        self.valid[slots, bodies_out] = False
        return out


@dataclass
class PrioritizedReplayConfig(ReplayConfig):
    """Proportional prioritisation: P(i) ~ (|td| + eps)^alpha, importance weights with exponent beta. `new_error`:
    the TD error a new transition enters with; None, the largest priority seen so far (Schaul et al.), so each is
    replayed at least once soon; a number, that error for every new one (SLM Lab's PER enters each at 100,000, so a
    new transition is all but sure to be drawn into the next batch, whatever the errors seen)."""

    alpha: float = field(default=0.6, metadata={"min": 0.0})
    beta: float | Schedule = 0.4
    eps: float = field(default=1e-6, metadata={"min": 0.0})
    new_error: float | None = field(default=None, metadata={"min": 0.0})


class SumTree:
    """Binary sum tree over `capacity` leaves with vectorised updates and prefix-sum searches."""

    def __init__(self, capacity: int) -> None:
        self.leaves = 1 << max(0, int(np.ceil(np.log2(max(capacity, 1)))))
        self.tree = np.zeros(2 * self.leaves, np.float64)

    @property
    def total(self) -> float:
        return float(self.tree[1])

    def set(self, idx: np.ndarray, values: np.ndarray) -> None:
        """Set leaf values and refresh their ancestors, one tree level at a time (no leaves: nothing to do, as
        when no body of a turn-based group finished a transition this step)."""
        nodes = np.asarray(idx) + self.leaves
        if nodes.size == 0:
            return
        self.tree[nodes] = values
        nodes = nodes // 2  # a parent listed twice is given the same sum twice: no need to dedupe (np.unique sorts)
        while nodes[0] >= 1:
            self.tree[nodes] = self.tree[2 * nodes] + self.tree[2 * nodes + 1]
            if nodes[0] == 1:
                break
            nodes = nodes // 2

    def get(self, idx: np.ndarray) -> np.ndarray:
        return self.tree[np.asarray(idx) + self.leaves]

    def find(self, prefix: np.ndarray) -> np.ndarray:
        """Leaf index whose cumulative range holds each prefix sum."""
        nodes = np.ones(len(prefix), np.int64)
        prefix = prefix.astype(np.float64).copy()
        while nodes[0] < self.leaves:
            left = 2 * nodes
            left_sum = self.tree[left]
            go_right = prefix >= left_sum
            prefix -= left_sum * go_right
            nodes = left + go_right
        return nodes - self.leaves


class PrioritizedReplay(Replay):
    """Replay sampled in proportion to TD error, with importance-sampling weights normalised by their max."""

    Config = PrioritizedReplayConfig

    def __init__(self, config: PrioritizedReplayConfig, num_bodies: int, obs_shape: tuple[int, ...],
                 obs_dtype: np.dtype, act_shape: tuple[int, ...], act_dtype: np.dtype, seed: int = 0) -> None:
        super().__init__(config, num_bodies, obs_shape, obs_dtype, act_shape, act_dtype, seed)
        self.alpha = config.alpha
        self.eps = config.eps
        self.beta = config.beta
        self.tree = SumTree(self.capacity)
        self.max_priority = 1.0
        self.new_error = config.new_error

    def add(self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray, next_obs: np.ndarray,
            terminated: np.ndarray, next_mask: np.ndarray | None = None,
            discounts: np.ndarray | None = None) -> np.ndarray:
        """Store transitions with the highest priority seen so far (or `new_error`'s), so each is replayed soon."""
        idx = super().add(obs, action, reward, next_obs, terminated, next_mask, discounts)
        priority = self.max_priority if self.new_error is None else self.new_error + self.eps
        self.tree.set(idx, np.full(len(idx), priority**self.alpha))
        return idx

    def sample(self, frame: int = 0, batch_size: int | None = None) -> ReplayBatch:
        """A stratified batch drawn in proportion to priority, with importance weights for `frame`'s beta."""
        n = batch_size or self.batch_size
        total = self.tree.total
        bounds = np.linspace(0.0, total, n + 1)
        prefix = self.rng.uniform(bounds[:-1], bounds[1:])
        idx = self._combine(np.minimum(self.tree.find(np.minimum(prefix, total * (1 - 1e-12))), self.size - 1))
        probs = self.tree.get(idx) / total
        beta = value_at(self.beta, frame)
        weights = (self.size * np.maximum(probs, 1e-12)) ** (-beta)
        return self._gather(idx, (weights / weights.max()).astype(np.float32))

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """New priorities |td| + eps for the sampled slots."""
        priority = np.abs(td_errors) + self.eps
        self.max_priority = max(self.max_priority, float(priority.max()))
        self.tree.set(indices, priority**self.alpha)

    def state_dict(self) -> dict[str, Any]:
        """Replay's state plus the priority tree and the largest priority seen."""
        return {**super().state_dict(), "tree": torch.from_numpy(self.tree.tree.copy()),
                "max_priority": self.max_priority}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.tree.tree[:] = state["tree"].numpy()
        self.max_priority = float(state["max_priority"])
