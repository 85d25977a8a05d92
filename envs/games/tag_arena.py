"""Tag arena: a simultaneous-move pursuit-evasion gridworld whose players are entities from the registry.

Each player is an entity of a type the env allows (``runner``, ``chaser`` or any subclass of them, e.g. a
user-registered ``fast_runner``); its parameters (``speed``, ``sight``, ``reach``) and its ``update`` rule
drive the dynamics. A step: every live entity moves by its own rule (in player order, walls stop it), then
each live chaser catches every live runner within its reach. A caught runner gets -1 and is terminated;
every chaser that reached it gets +1. When no runner is left the chasers terminate too; otherwise everyone
left is truncated after ``max_cycles`` steps.

Player names are ``<role>_<i>`` numbered per role in entity order (``chaser_0``, ``runner_0``, ...).
Actions are ``Discrete(5)``: 0 stay, 1 up, 2 down, 3 left, 4 right. Observations are float32 vectors in
[-1, 1] of size ``4 + 4 * (n - 1)``: own row and column (scaled to [0, 1]), 1 if a chaser, the fraction of
steps left; then for every other player in player order: its row and column offset (scaled by the grid
size), 1 if it is live and within sight, 1 if it is a chaser. Offsets of unseen players are 0.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from gymnasium import spaces

from slm_lab_like.envs.entities import Entity, EntityError, EntitySpace
from slm_lab_like.envs.games.world_env import WorldParallelEnv, move

__all__ = ["DEFAULT_ENTITIES", "ENTITY_SPACE", "TagArenaEnv", "TagWorld", "parallel_env"]

ENTITY_SPACE = EntitySpace(env="tag_arena", allowed=("runner", "chaser"))
"""The entity types the tag arena allows: runners, chasers, and subclasses of either."""

DEFAULT_ENTITIES: tuple[dict[str, Any], ...] = (
    {"type": "chaser"},
    {"type": "chaser"},
    {"type": "runner"},
    {"type": "runner"},
)
"""Two chasers and two runners with default parameters."""



class TagWorld:
    """The arena's state and rules without any multi-agent API: entities on a ``rows x cols`` grid."""

    def __init__(
        self,
        entities: Sequence[Entity],
        size: tuple[int, int] = (7, 7),
        starts: Sequence[tuple[int, int] | None] | None = None,
    ) -> None:
        self.entities = list(entities)
        self.rows, self.cols = int(size[0]), int(size[1])
        self.starts = list(starts) if starts is not None else [None] * len(self.entities)
        self._high = np.array([self.rows - 1, self.cols - 1], dtype=np.int64)
        self.is_chaser = np.array([e.role == "chaser" for e in self.entities], dtype=bool)
        self.is_runner = np.array([e.role == "runner" for e in self.entities], dtype=bool)
        n = len(self.entities)
        self._others = np.array([[j for j in range(n) if j != i] for i in range(n)], dtype=np.int64).reshape(n, n - 1)

    def move(self, position: np.ndarray, delta: np.ndarray, steps: int) -> np.ndarray:
        """The cell reached from ``position`` after up to ``steps`` moves of ``delta``; walls stop the mover."""
        r = min(max(int(position[0]) + int(delta[0]) * steps, 0), self.rows - 1)
        c = min(max(int(position[1]) + int(delta[1]) * steps, 0), self.cols - 1)
        return np.array((r, c), dtype=np.int64)

    def reset(self, rng: np.random.Generator) -> None:
        """Revive everyone; fixed starts where given, distinct random free cells for the rest."""
        fixed = {(int(s[0]), int(s[1])) for s in self.starts if s is not None}
        free = [i for i in range(self.rows * self.cols) if divmod(i, self.cols) not in fixed]
        num_random = sum(s is None for s in self.starts)
        picks = iter(rng.choice(len(free), size=num_random, replace=False).tolist())
        for entity, start in zip(self.entities, self.starts):
            cell = start if start is not None else divmod(free[next(picks)], self.cols)
            entity.position = np.array(cell, dtype=np.int64)
            entity.alive = True

    def step(self, actions: Sequence[int | None]) -> list[tuple[int, int]]:
        """Move every live entity (None means stay), then resolve captures; returns (chaser, runner) pairs."""
        for entity, action in zip(self.entities, actions):
            if entity.alive:
                entity.update(0 if action is None else action, self)
        captures: list[tuple[int, int]] = []
        for j, runner in enumerate(self.entities):
            if not (self.is_runner[j] and runner.alive):
                continue
            catchers = [i for i, c in enumerate(self.entities) if c.alive and i != j and c.captures(runner)]
            captures.extend((i, j) for i in catchers)
            if catchers:
                runner.alive = False
        return captures

    def runners_left(self) -> int:
        """How many runners are still live."""
        return sum(1 for j, e in enumerate(self.entities) if self.is_runner[j] and e.alive)

    def observations(self, time_left: float) -> np.ndarray:
        """float32 (n, 4 + 4 (n - 1)) observations of every player, in player order (see the module doc)."""
        n = len(self.entities)
        pos = np.concatenate([e.position for e in self.entities]).reshape(n, 2)
        alive = np.array([e.alive for e in self.entities], dtype=bool)
        sight = np.array([getattr(e, "sight", max(self.rows, self.cols)) for e in self.entities])
        scale = np.maximum(self._high, 1).astype(np.float32)
        out = np.zeros((n, 4 + 4 * (n - 1)), dtype=np.float32)
        out[:, 0:2] = pos / scale
        out[:, 2] = self.is_chaser
        out[:, 3] = time_left
        if n > 1:
            others = self._others
            delta = pos[others] - pos[:, None, :]
            seen = alive[others] & (np.abs(delta).max(axis=2) <= sight[:, None])
            slots = np.empty((n, n - 1, 4), dtype=np.float32)
            slots[:, :, 0:2] = np.where(seen[:, :, None], delta / scale, 0.0)
            slots[:, :, 2] = seen
            slots[:, :, 3] = self.is_chaser[others]
            out[:, 4:] = slots.reshape(n, 4 * (n - 1))
        return out

    def render(self) -> str:
        """Text picture: 'C' chaser, 'R' runner, '*' several, '.' empty; caught runners are not shown."""
        grid = [["."] * self.cols for _ in range(self.rows)]
        for entity in self.entities:
            if entity.alive:
                r, c = (int(v) for v in entity.position)
                mark = "C" if entity.role == "chaser" else "R" if entity.role == "runner" else "E"
                grid[r][c] = mark if grid[r][c] == "." else "*"
        return "\n".join("".join(row) for row in grid)


def _parse_start(value: Any, size: tuple[int, int], where: str) -> tuple[int, int]:
    """A fixed start cell ``[row, col]`` inside the grid; EntityError otherwise."""
    ok = (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value)
    )
    if not ok or not (0 <= value[0] < size[0] and 0 <= value[1] < size[1]):
        raise EntityError(
            f"{where}.start", f"expected [row, col] inside the {size[0]}x{size[1]} grid, got {value!r}"
        )
    return int(value[0]), int(value[1])


class TagArenaEnv(WorldParallelEnv):
    """The tag arena as a PettingZoo parallel env; players are entities checked against ``ENTITY_SPACE``.

    ``entities`` items are type names, ``{"type": ..., param: value, "start": [row, col]}`` dicts (``start``
    fixes the cell at every reset; others get distinct random cells) or Entity instances made elsewhere;
    ``size`` is the grid side or (rows, cols).
    """

    metadata: dict[str, Any] = {"name": "tag_arena_v0", "render_modes": ["ansi", "human"], "is_parallelizable": True}
    entity_space = ENTITY_SPACE

    def __init__(
        self,
        entities: Sequence[str | Mapping[str, Any] | Entity] | None = None,
        size: int | tuple[int, int] = 7,
        max_cycles: int = 100,
        render_mode: str | None = None,
        where: str = "entities",
    ) -> None:
        """Check and build the entities (names, dicts or instances); ``where`` names the list in error messages."""
        self._open("tag arena", render_mode)
        rows, cols = (size, size) if isinstance(size, (int, np.integer)) else tuple(size)
        if rows < 2 or cols < 2:
            raise ValueError(f"size must be at least 2x2, got {rows}x{cols}")
        if int(max_cycles) < 1:
            raise ValueError(f"max_cycles must be >= 1, got {max_cycles}")
        specs = list(DEFAULT_ENTITIES if entities is None else entities)
        if not specs:
            raise EntityError(where, "expected at least one entity")
        if len(specs) > rows * cols:
            raise EntityError(where, f"{len(specs)} entities do not fit on a {rows}x{cols} grid")
        built, starts = [], []
        for i, spec in enumerate(specs):
            item = f"{where}[{i}]"
            start = None
            if isinstance(spec, Mapping) and "start" in spec:
                start = _parse_start(spec["start"], (rows, cols), item)
                spec = {k: v for k, v in spec.items() if k != "start"}
            built.append(self.entity_space.make(spec, item))
            starts.append(start)
        taken = [s for s in starts if s is not None]
        if len(set(taken)) != len(taken):
            raise EntityError(where, "two entities have the same start cell")
        if len({id(e) for e in built}) != len(built):
            raise EntityError(where, "the same entity instance is listed twice")
        self.world = TagWorld(built, (rows, cols), starts)
        self.size = (rows, cols)
        counts: dict[str, int] = {}
        names = []
        for entity in built:
            role = entity.role or "entity"
            names.append(f"{role}_{counts.get(role, 0)}")
            counts[role] = counts.get(role, 0) + 1
        self.entities: dict[str, Entity] = dict(zip(names, built))
        self._index = {name: i for i, name in enumerate(names)}
        self._seat(names, spaces.Box(-1.0, 1.0, (4 + 4 * (len(names) - 1),), dtype=np.float32), max_cycles)

    def _observe(self, names: Sequence[str]) -> dict[str, np.ndarray]:
        """Fresh observations of ``names``."""
        obs = self.world.observations(max(0.0, 1.0 - self.num_cycles / max(self.max_cycles, 1)))
        return {a: obs[self._index[a]] for a in names}

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Move all live players at once (a missing action means stay), resolve captures, end finished players."""
        self._check_step(actions)
        per_entity: list[int | None] = [None] * len(self.possible_agents)
        for agent in self.agents:
            if agent in actions:
                per_entity[self._index[agent]] = move(agent, actions[agent])
        live = self.agents
        captures = self.world.step(per_entity)
        self.num_cycles += 1
        rewards = {a: 0.0 for a in live}
        caught = set()
        for i, j in captures:
            rewards[self.possible_agents[i]] += 1.0
            caught.add(self.possible_agents[j])
        for name in caught:
            rewards[name] -= 1.0
        had_runners = bool(self.world.is_runner.any())
        all_caught = had_runners and self.world.runners_left() == 0
        terminations = {a: a in caught or (all_caught and self.entities[a].role != "runner") for a in live}
        out_of_time = self.num_cycles >= self.max_cycles
        truncations = {a: out_of_time and not terminations[a] for a in live}
        observations = self._observe(live)
        infos: dict[str, dict[str, Any]] = {a: {} for a in live}
        for name in caught:
            infos[name]["caught_by"] = [self.possible_agents[i] for i, j in captures if self.possible_agents[j] == name]
        self.agents = [a for a in live if not (terminations[a] or truncations[a])]
        if self.render_mode == "human":
            print(self.render())
        return observations, rewards, terminations, truncations, infos


def parallel_env(**kwargs: Any) -> TagArenaEnv:
    """The tag arena parallel env, PettingZoo style."""
    return TagArenaEnv(**kwargs)
