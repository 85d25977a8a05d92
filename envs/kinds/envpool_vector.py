"""The envpool kind (`vector: "envpool"`, with the `envpool` extra installed): an agent's bodies in an env that
envpool implements (Atari, MuJoCo, classic control, ...) are one envpool batch, stepped in C++ threads.

envpool resets a finished env on the next step, as gymnasium's NEXT_STEP vector envs do, so the lab runs it through
the same GymNativeVectorEnv: final observations kept, the reset step not counted nor acted on, `max_t` as envpool's
`max_episode_steps`. envpool seeds at construction, so a reset with a new seed builds the batch again."""
from __future__ import annotations

import warnings
from functools import lru_cache, partial
from typing import Any

import gymnasium as gym

from slm_lab_like.envs.adapter import BlockSig, EntryError, EnvEntry
from slm_lab_like.envs.base import Clock, LabEnv
from slm_lab_like.envs.kinds.gym_copies import GymCopies
from slm_lab_like.envs.native_vector import GymNativeVectorEnv


@lru_cache(maxsize=None)
def envpool_names() -> frozenset[str] | None:
    """The env ids envpool offers, or None when envpool is not installed."""
    try:
        import envpool
    except ImportError:
        return None
    return frozenset(envpool.list_all_envs())


class EnvpoolVector(gym.vector.VectorEnv):
    """An envpool batch of `n` envs as a gymnasium VectorEnv (NEXT_STEP autoreset), as GymNativeVectorEnv steps it."""

    metadata: dict[str, Any] = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, name: str, n: int, max_t: int | None, kwargs: dict[str, Any], seed: int = 0) -> None:
        self.name, self.num_envs, self.options = name, n, dict(kwargs)
        if max_t is not None:
            self.options["max_episode_steps"] = max_t
        self._build(seed)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, n)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, n)

    def _build(self, seed: int) -> None:
        import envpool

        self.seed = seed
        with warnings.catch_warnings():  # envpool's own float64 space bounds, cast by gymnasium: not the user's
            warnings.simplefilter("ignore", UserWarning)
            self.pool = envpool.make_gymnasium(self.name, num_envs=self.num_envs, batch_size=self.num_envs,
                                               seed=seed, **self.options)
            self.single_observation_space = self.pool.observation_space
            self.single_action_space = self.pool.action_space

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """envpool takes its seed only when built: a new seed builds the batch again."""
        if seed is not None and seed != self.seed:
            self.pool.close()
            self._build(seed)
        return self.pool.reset()

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        return self.pool.step(actions)

    def render(self) -> Any:
        """The first env's frame, as gymnasium's vector envs give frames: one per env asked (envpool draws env 0 as a
        batch of one; it draws only when made with a render_mode, which enjoy asks for)."""
        frames = self.pool.render()
        return None if frames is None else tuple(frames)

    def close_extras(self, **kwargs: Any) -> None:
        self.pool.close()


class Envpool(GymCopies):
    """An agent's bodies as one envpool batch; claims only entries that ask for it (`vector: "envpool"`)."""

    kind = "envpool"
    priority = 6

    @classmethod
    def claims(cls, entry: EnvEntry) -> bool:
        return entry.remote is None and entry.vector == "envpool"

    def _probe(self, n_slots: int, plan: Any) -> list[BlockSig]:
        names = envpool_names()
        if names is None:
            raise EntryError("vector", 'envpool is not installed (pip install "slm_lab_like[envpool]")')
        if self.entry.name not in names:
            raise EntryError("vector", f'envpool has no env "{self.entry.name}"; use "auto", "sync" or "async"')
        try:
            venv = EnvpoolVector(self.entry.name, 1, self.entry.max_t, self.entry.kwargs)
        except Exception as err:  # envpool's config refuses unknown kwargs with its own errors
            raise EntryError("kwargs", f'envpool cannot build "{self.entry.name}": {type(err).__name__}: {err}'
                             ) from None
        obs, act = venv.single_observation_space, venv.single_action_space
        venv.close()
        if not isinstance(obs, gym.spaces.Box):
            raise EntryError("vector", f'envpool\'s "{self.entry.name}" observes {obs}; use "sync"')
        return [BlockSig(0, n_slots, obs, act, turns=True)]

    def build(self, n_slots: int, clock: Clock, plan: Any = None) -> LabEnv:
        entry = self.entry
        return GymNativeVectorEnv(entry.name, partial(EnvpoolVector, entry.name, max_t=entry.max_t,
                                                      kwargs=entry.kwargs), n_slots, clock)
