"""Overhead of the lab's multi-agent path: 8 bodies, each the player of its own CartPole-v1 inside one
PettingZoo ParallelEnv (`MultiCartPole`), random actions, against a bare loop stepping that same env.

A player whose CartPole episode ends leaves the env (PettingZoo semantics); the env's episode ends when
all 8 have, and both sides reset it then. Speeds are agent-steps (frames) per second of this process's CPU
time (time.process_time). The lab side is a whole session (one Random agent owning the 8 bodies, session
building included); the bare side draws the 8 actions with one numpy call per step (cheaper than 8
`space.sample()` calls) and builds the action dict itself. Runs alternate; the median of --repeats runs
per side gives the ratio lab / bare (target >= 0.85).
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv

from slm_lab_like.envs.make import register_multiagent
from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.load import validate

N_PLAYERS = 8


class MultiCartPole(ParallelEnv):
    """`n` independent CartPole-v1 envs as the players `cart_0 .. cart_<n-1>` of one parallel env."""

    metadata = {"name": "multi_cartpole_v0"}

    def __init__(self, n: int = N_PLAYERS) -> None:
        self.possible_agents = [f"cart_{i}" for i in range(n)]
        self.envs = {a: gym.make("CartPole-v1") for a in self.possible_agents}
        first = self.envs[self.possible_agents[0]]
        self._obs_space, self._act_space = first.observation_space, first.action_space
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> gym.Space:
        return self._obs_space

    def action_space(self, agent: str) -> gym.Space:
        return self._act_space

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.agents = self.possible_agents[:]
        obs = {a: self.envs[a].reset(seed=None if seed is None else seed + i)[0] for i, a in enumerate(self.agents)}
        return obs, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        obs, rew, term, trunc, info = {}, {}, {}, {}, {}
        for a in self.agents:
            obs[a], rew[a], term[a], trunc[a], info[a] = self.envs[a].step(actions[a])
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rew, term, trunc, info

    def close(self) -> None:
        for env in self.envs.values():
            env.close()


register_multiagent("multi_cartpole", MultiCartPole, "parallel")


def lab_fps(frames: int, seed: int) -> float:
    """Agent-steps per CPU second of a lab session: one Random agent owning the 8 players."""
    raw = {"agent": [{"name": "random", "algorithm": {"name": "Random"}}],
           "env": [{"name": "multi_cartpole", "max_frame": frames}],
           "body": {"product": "outer", "num": N_PLAYERS}, "meta": {"log_frequency": 10 * frames}}
    session = Session(validate(raw, "bench"), seed=seed)
    start = time.process_time()
    result = session.run()
    return result.env_frames[0] / (time.process_time() - start)


def bare_fps(frames: int, seed: int) -> float:
    """Agent-steps per CPU second of a plain PettingZoo loop over the same env."""
    env = MultiCartPole()
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    done = 0
    start = time.process_time()
    while done < frames:
        live = env.agents
        acts = rng.integers(0, 2, N_PLAYERS)
        env.step({a: acts[i] for i, a in enumerate(live)})
        done += len(live)
        if not env.agents:
            env.reset()
    wall = time.process_time() - start
    env.close()
    return done / wall


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frames", type=int, default=100_000)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    labs, bares = [], []
    for i in range(a.repeats):
        labs.append(lab_fps(a.frames, i))
        bares.append(bare_fps(a.frames, i))
    ratio = statistics.median(labs) / statistics.median(bares)
    print(f"8 players of MultiCartPole: lab {statistics.median(labs):,.0f} agent-steps/s, bare loop "
          f"{statistics.median(bares):,.0f} agent-steps/s, ratio {ratio:.3f} (target >= 0.85)")


if __name__ == "__main__":
    main()
