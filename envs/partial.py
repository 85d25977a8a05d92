"""Partially observed versions of classic envs, for nets with memory: CartPole with its velocities hidden.

Importing this module registers `CartPolePositionOnly-v1` with gymnasium, so a spec names it as
`slm_lab_like.envs.partial:CartPolePositionOnly-v1`: CartPole-v1 (500 steps) whose observation is the cart's
position and the pole's angle only. A feed-forward policy sees no velocity and cannot balance the pole for long;
a recurrent one can infer the velocities from successive observations.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

POSITIONS = [0, 2]  # CartPole's (x, x_dot, theta, theta_dot): x and theta


class PositionsOnly(gym.ObservationWrapper):
    """Keeps the observation's POSITIONS entries (a Box of 2)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        box = env.observation_space
        assert isinstance(box, gym.spaces.Box)
        self.observation_space = gym.spaces.Box(box.low[POSITIONS], box.high[POSITIONS], dtype=np.float32)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.asarray(observation, np.float32)[POSITIONS]


def cartpole_position_only(**kwargs: Any) -> gym.Env:
    """CartPole with the velocities hidden."""
    return PositionsOnly(CartPoleEnv(**kwargs))


if "CartPolePositionOnly-v1" not in gym.registry:
    gym.register("CartPolePositionOnly-v1", entry_point=cartpole_position_only, max_episode_steps=500,
                 reward_threshold=475.0)
