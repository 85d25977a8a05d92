"""The gymnasium kind: a single-agent gymnasium env (an id, a built-in or `module:Class`) whose bodies are copies
of it, stepped in-process (`vector: "sync"`) or in worker processes (`"async"`)."""
from __future__ import annotations

from functools import partial
from typing import Any

import gymnasium as gym

from slm_lab_like.envs.adapter import BlockSig, EntryError, EnvAdapter, EnvEntry, Hosting, build_error
from slm_lab_like.envs.base import Clock, LabEnv
from slm_lab_like.envs.gym_vector import GymAsyncVectorEnv, GymVectorEnv
from slm_lab_like.envs.make import check_name, creator_metadata, env_creator, make_gym
from slm_lab_like.envs.outputs import check_outputs
from slm_lab_like.envs.spaces import SpaceError, lab_view


def probe_gym(name: str, kwargs: dict[str, Any], max_t: int | None) -> tuple[gym.Space, gym.Space]:
    """Build one env of `name` and return its (observation, action) spaces as the lab sees them, or EntryError
    with the key at fault: `kwargs` the constructor refuses, a `name` that is no gymnasium.Env, a space the lab
    cannot hold, a reset or step that does not give what the API and those spaces promise (`check_outputs`)."""
    try:
        env = make_gym(name, max_t, **kwargs)
    except ValueError as err:
        raise EntryError("name", str(err)) from None
    except Exception as err:  # a user's constructor may fail in any way; report it in one line
        raise build_error(name, kwargs, err) from None
    try:
        view = lab_view(env, f'env "{name}"')
        check_outputs(view, f'env "{name}"')
        return view.observation_space, view.action_space
    except SpaceError as err:
        raise EntryError("name", str(err)) from None
    finally:
        env.close()


class GymCopies(EnvAdapter):
    """Copies of a single-agent gymnasium env, one per body."""

    kind = "single-agent gymnasium"
    copies = True

    @classmethod
    def claims(cls, entry: EnvEntry) -> bool:
        return entry.remote is None and check_name(entry.name) is None

    def body_options_problem(self) -> str | None:
        return (f'per-body options are for multi-agent envs; "{self.entry.name}" is a single-agent gymnasium env '
                "whose bodies are copies of it")

    def _probe(self, n_slots: int, plan: Any) -> list[BlockSig]:
        obs, act = probe_gym(self.entry.name, self.entry.kwargs, self.entry.max_t)
        return [BlockSig(0, n_slots, obs, act)]

    def build(self, n_slots: int, clock: Clock, plan: Any = None) -> LabEnv:
        entry = self.entry
        make = partial(make_gym, entry.name, entry.max_t, **entry.kwargs)
        cls = GymAsyncVectorEnv if entry.vector == "async" else GymVectorEnv
        return cls(entry.name, make, n_slots, clock)

    def host(self) -> Hosting:
        return Hosting(partial(make_gym, self.entry.name, self.entry.max_t, **self.entry.kwargs), "single")

    def metadata(self) -> dict[str, Any]:
        return creator_metadata(env_creator(self.entry.name), self.entry.kwargs)
