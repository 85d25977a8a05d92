"""Spread: a cooperative navigation game of the kind of MPE's ``simple_spread`` (numpy, seeded, no pygame).

``n_agents`` agents and ``n_landmarks`` landmarks (as many as agents by default) start at uniform random
points of the square [-1, 1]^2. Agents are point masses with MPE's dynamics: an action pushes with force
``accel`` along one axis, velocity is damped by ``damping`` each step and positions integrate over ``dt``.
The team should cover every landmark while not bumping into each other; every agent gets the same reward:

    reward = - sum over landmarks of the distance to its nearest agent
             - collision_penalty * (number of pairs of agents closer than 2 * size)

Every player is truncated after ``max_cycles`` steps (nobody terminates). Player names are ``agent_<i>``.
Actions are ``Discrete(5)`` as in MPE: 0 no-op, 1 left (-x), 2 right (+x), 3 down (-y), 4 up (+y).
Observations are float32 vectors of size ``4 + 2 * n_landmarks + 2 * (n_agents - 1)`` (``+ n_agents`` with
``agent_id``): own velocity and position, then every landmark's position relative to the agent (landmark order),
then every other agent's position relative to it (player order), then, with ``agent_id``, the one-hot of the
agent's index (so agents sharing one policy can split the landmarks by a convention). With ``sight`` set, other
agents farther than ``sight`` read as (0, 0): the map is known, teammates are seen only nearby, so an agent's
own observation no longer tells the team's reward (a partially observed variant; MPE's spread sees everything,
``sight=None``).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from gymnasium import spaces

from slm_lab_like.envs.games.world_env import WorldParallelEnv, move

__all__ = ["SpreadEnv", "SpreadWorld", "parallel_env"]

_PUSH = np.array([[0.0, 0.0], [-1.0, 0.0], [1.0, 0.0], [0.0, -1.0], [0.0, 1.0]])


class SpreadWorld:
    """The game's state and rules without any multi-agent API: positions, velocities, one step of physics."""

    def __init__(self, n_agents: int = 3, n_landmarks: int | None = None, size: float = 0.15, accel: float = 5.0,
                 damping: float = 0.25, dt: float = 0.1, collision_penalty: float = 1.0,
                 sight: float | None = None, agent_id: bool = False) -> None:
        self.n = int(n_agents)
        self.m = self.n if n_landmarks is None else int(n_landmarks)
        self.size, self.accel, self.damping, self.dt = float(size), float(accel), float(damping), float(dt)
        self.collision_penalty = float(collision_penalty)
        self.sight = None if sight is None else float(sight)
        self.agent_id = bool(agent_id)
        self.pos = np.zeros((self.n, 2))
        self.vel = np.zeros((self.n, 2))
        self.landmarks = np.zeros((self.m, 2))
        self._others = np.array([[j for j in range(self.n) if j != i] for i in range(self.n)],
                                dtype=np.int64).reshape(self.n, self.n - 1)
        self._pairs = np.triu(np.ones((self.n, self.n), bool), 1)

    @property
    def obs_size(self) -> int:
        return 4 + 2 * self.m + 2 * (self.n - 1) + (self.n if self.agent_id else 0)

    def reset(self, rng: np.random.Generator) -> None:
        """Agents and landmarks at uniform random points of [-1, 1]^2; agents at rest."""
        self.pos = rng.uniform(-1.0, 1.0, (self.n, 2))
        self.vel = np.zeros((self.n, 2))
        self.landmarks = rng.uniform(-1.0, 1.0, (self.m, 2))

    def step(self, actions: np.ndarray) -> float:
        """Move every agent by its action (int array of n); returns the team reward of the new state."""
        self.vel = self.vel * (1.0 - self.damping) + _PUSH[actions] * (self.accel * self.dt)
        self.pos = self.pos + self.vel * self.dt
        return self.reward()

    def distances(self) -> tuple[np.ndarray, np.ndarray]:
        """(agent-to-landmark distances (n, m), agent-to-agent distances (n, n))."""
        to_land = np.linalg.norm(self.pos[:, None, :] - self.landmarks[None, :, :], axis=2)
        to_agent = np.linalg.norm(self.pos[:, None, :] - self.pos[None, :, :], axis=2)
        return to_land, to_agent

    def collisions(self) -> int:
        """Pairs of agents whose discs overlap."""
        return int(np.count_nonzero((self.distances()[1] < 2 * self.size) & self._pairs))

    def reward(self) -> float:
        """The shared reward: minus the landmarks' distances to their nearest agents, minus collision penalties."""
        to_land, to_agent = self.distances()
        cover = float(to_land.min(axis=0).sum()) if self.n else 0.0
        bumps = int(np.count_nonzero((to_agent < 2 * self.size) & self._pairs))
        return -cover - self.collision_penalty * bumps

    def observations(self) -> np.ndarray:
        """float32 (n, obs_size) observations of every agent, in player order (see the module doc)."""
        rel_land = self.landmarks[None, :, :] - self.pos[:, None, :]  # (n, m, 2)
        rel_agent = self.pos[self._others] - self.pos[:, None, :]  # (n, n - 1, 2)
        if self.sight is not None:
            rel_agent = np.where(np.linalg.norm(rel_agent, axis=2, keepdims=True) <= self.sight, rel_agent, 0.0)
        parts = [self.vel, self.pos, rel_land.reshape(self.n, -1), rel_agent.reshape(self.n, -1)]
        if self.agent_id:
            parts.append(np.eye(self.n))
        return np.concatenate(parts, axis=1).astype(np.float32)

    def render(self, cells: int = 21) -> str:
        """Text picture of [-1.5, 1.5]^2: 'L' uncovered landmark, digits agents, '*' an agent on a landmark."""
        grid = [["."] * cells for _ in range(cells)]

        def cell(p: np.ndarray) -> tuple[int, int] | None:
            c = np.round((p + 1.5) / 3.0 * (cells - 1)).astype(int)
            return None if (c < 0).any() or (c >= cells).any() else (cells - 1 - int(c[1]), int(c[0]))

        for p in self.landmarks:
            rc = cell(p)
            if rc is not None:
                grid[rc[0]][rc[1]] = "L"
        for i, p in enumerate(self.pos):
            rc = cell(p)
            if rc is not None:
                grid[rc[0]][rc[1]] = "*" if grid[rc[0]][rc[1]] == "L" else str(i % 10)
        return "\n".join("".join(row) for row in grid)


class SpreadEnv(WorldParallelEnv):
    """Spread as a PettingZoo parallel env (see the module doc); every agent gets the team's reward."""

    metadata: dict[str, Any] = {"name": "spread_v0", "render_modes": ["ansi", "human"], "is_parallelizable": True}

    def __init__(self, n_agents: int = 3, n_landmarks: int | None = None, max_cycles: int = 25,
                 collision_penalty: float = 1.0, sight: float | None = None, agent_id: bool = False,
                 render_mode: str | None = None) -> None:
        self._open("spread", render_mode)
        if int(n_agents) < 1:
            raise ValueError(f"n_agents must be >= 1, got {n_agents}")
        if n_landmarks is not None and int(n_landmarks) < 1:
            raise ValueError(f"n_landmarks must be >= 1, got {n_landmarks}")
        if int(max_cycles) < 1:
            raise ValueError(f"max_cycles must be >= 1, got {max_cycles}")
        if sight is not None and not float(sight) > 0:
            raise ValueError(f"sight must be > 0 (or None to see everything), got {sight}")
        self.world = SpreadWorld(n_agents, n_landmarks, collision_penalty=collision_penalty, sight=sight,
                                 agent_id=agent_id)
        self._seat([f"agent_{i}" for i in range(self.world.n)],
                   spaces.Box(-np.inf, np.inf, (self.world.obs_size,), dtype=np.float32), max_cycles)

    def _observe(self, names: Sequence[str]) -> dict[str, np.ndarray]:
        obs = self.world.observations()
        return {a: obs[i] for i, a in enumerate(self.possible_agents) if a in names}

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Move every agent at once (a missing action is a no-op); every agent gets the team's reward."""
        self._check_step(actions)
        acts = np.zeros(self.world.n, dtype=np.int64)
        for i, name in enumerate(self.possible_agents):
            if name in actions:
                acts[i] = move(name, actions[name])
        reward = self.world.step(acts)
        self.num_cycles += 1
        live = self.agents
        out = self.num_cycles >= self.max_cycles
        observations = self._observe(live)
        self.agents = [] if out else live
        if self.render_mode == "human":
            print(self.render())
        return (observations, {a: reward for a in live}, {a: False for a in live}, {a: out for a in live},
                {a: {} for a in live})


def parallel_env(**kwargs: Any) -> SpreadEnv:
    """The spread parallel env, PettingZoo style."""
    return SpreadEnv(**kwargs)
