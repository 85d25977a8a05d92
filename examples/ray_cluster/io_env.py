"""An I/O-bound env for the Ray examples: CartPole-v1 whose every step also waits 2 ms (a simulator or a service
answering over the network), so an env step costs wall-clock time and next to no CPU."""
from __future__ import annotations

import time
from typing import Any

import gymnasium as gym


class SlowCartPole(gym.Wrapper):
    """CartPole-v1 with a `delay`-second wait in every step."""

    def __init__(self, delay: float = 0.002, **kwargs: Any) -> None:
        super().__init__(gym.make("CartPole-v1", **kwargs))
        self.delay = delay

    def step(self, action: Any) -> Any:
        time.sleep(self.delay)
        return self.env.step(action)
