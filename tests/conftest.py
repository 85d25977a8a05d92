"""Shared fixtures: small raw specs and a helper to validate them."""
from __future__ import annotations

import copy

import pytest


def random_spec(n_agents: int = 1, n_envs: int = 1, num: int | list[int] = 1, max_frame: int = 200,
                env: str = "CartPole-v1") -> dict:
    """A raw spec of Random agents in CartPole-v1 copies."""
    return {
        "agent": [{"name": f"r{a}", "algorithm": {"name": "Random"}} for a in range(n_agents)],
        "env": [{"name": env, "max_frame": max_frame} for _ in range(n_envs)],
        "body": {"product": "outer", "num": num},
        "meta": {"random_seed": 7, "log_frequency": 10**9},
    }


@pytest.fixture
def raw_spec() -> dict:
    return copy.deepcopy(random_spec())
