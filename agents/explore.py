"""Exploration for value-based agents: epsilon-greedy and Boltzmann action selection over Q-values, batched."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from slm_lab_like.agents.schedule import value_at


def masked(values: torch.Tensor, mask: "np.ndarray | torch.Tensor") -> torch.Tensor:
    """Q-values or logits with illegal actions (mask False) pushed to -1e9; rows with no legal action stay as
    they are (bodies that do not act, ended episodes), so maxima and softmaxes stay finite."""
    m = torch.as_tensor(mask, dtype=torch.bool, device=values.device)
    m = m | ~m.any(dim=1, keepdim=True)
    return values.masked_fill(~m, -1e9)


def random_legal(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random legal action per row of a bool (rows, n_actions) mask; 0 where none is legal."""
    u = rng.random(mask.shape)
    u[~mask] = -1.0
    return u.argmax(axis=1)


def epsilon_greedy(q: torch.Tensor, epsilon: float, rng: np.random.Generator,
                   mask: np.ndarray | None = None) -> np.ndarray:
    """Greedy actions, each replaced by a uniform random one (a legal one under `mask`) with probability epsilon."""
    greedy = q.argmax(dim=1).cpu().numpy()
    if epsilon <= 0.0:
        return greedy
    n, n_actions = q.shape
    explore = rng.random(n) < epsilon
    if explore.any():
        if mask is None:
            greedy[explore] = rng.integers(0, n_actions, int(explore.sum()))
        else:
            greedy[explore] = random_legal(mask[explore], rng)
    return greedy


def boltzmann(q: torch.Tensor, temperature: float, rng: np.random.Generator) -> np.ndarray:
    """Actions sampled from softmax(Q / temperature); greedy when temperature is 0."""
    if temperature <= 0.0:
        return q.argmax(dim=1).cpu().numpy()
    probs = torch.softmax(q / temperature, dim=1).double().cpu().numpy()
    cum = probs.cumsum(axis=1)
    u = rng.random((len(probs), 1)) * cum[:, -1:]
    return np.minimum((u > cum).sum(axis=1), probs.shape[1] - 1)


def explore(q: torch.Tensor, config: Any, frame: int, rng: np.random.Generator,
            mask: np.ndarray | None = None) -> np.ndarray:
    """Exploring actions of a value-based agent whose config names `explore` ("epsilon_greedy" or "boltzmann") with
    its `epsilon` or `temperature` (numbers or schedules over frames), at `frame`."""
    if config.explore == "epsilon_greedy":
        return epsilon_greedy(q, value_at(config.epsilon, frame), rng, mask)
    return boltzmann(q, value_at(config.temperature, frame), rng)


def explore_stat(config: Any, frame: int) -> tuple[str, float]:
    """The exploring parameter at `frame` as a stat: ("train/epsilon", value) or ("train/temperature", value)."""
    if config.explore == "epsilon_greedy":
        return "train/epsilon", value_at(config.epsilon, frame)
    return "train/temperature", value_at(config.temperature, frame)
