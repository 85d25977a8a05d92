"""Small games and players for the tournament tests: a three-player bidding game and fixed bidders."""
from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class BidEnv(ParallelEnv):
    """Three players bid 0, 1 or 2 at once; the highest bid scores 1, the others 0 (ties share the top)."""

    metadata = {"name": "bid_v0"}

    def __init__(self) -> None:
        self.render_mode = None
        self.possible_agents = ["bidder_0", "bidder_1", "bidder_2"]
        self.agents: list[str] = []
        self._obs = spaces.Box(0, 1, (1,), np.float32)
        self._act = spaces.Discrete(3)

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs

    def action_space(self, agent: str) -> spaces.Space:
        return self._act

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.agents = list(self.possible_agents)
        return {a: np.zeros(1, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        top = max(int(v) for v in actions.values())
        rewards = {a: float(int(actions[a]) == top) for a in self.agents}
        obs = {a: np.zeros(1, np.float32) for a in self.agents}
        done = {a: True for a in self.agents}
        infos: dict[str, dict] = {a: {} for a in self.agents}
        self.agents = []
        return obs, rewards, done, {a: False for a in done}, infos


class Bidder:
    """Bids `BID` always."""

    BID = 0

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed

    def __call__(self, obs: Any) -> int:
        return self.BID


class Bid0(Bidder):
    BID = 0


class Bid1(Bidder):
    BID = 1


class Bid2(Bidder):
    BID = 2


class Stack0:
    """Connect four: always column 0, legal or not (a buggy player: forfeits once the column is full)."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed

    def __call__(self, obs: Any) -> int:
        return 0
