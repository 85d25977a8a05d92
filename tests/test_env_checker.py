"""check_lab_env on every env kind and built-in game, and on envs that break the contract on purpose."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from slm_lab_like.envs.registry import adapter_for  # noqa: E402
from slm_lab_like.envs.base import Clock, LabEnv  # noqa: E402
from slm_lab_like.envs.checker import LabEnvCheckError, check_lab_env  # noqa: E402
from slm_lab_like.envs.gym_vector import GymVectorEnv  # noqa: E402
from slm_lab_like.envs.make import make_gym  # noqa: E402
from slm_lab_like.spec.schema import EnvSpec  # noqa: E402

SPACE_ENV = "tests.space_envs:SpaceEnv"


def maker(n: int, **entry: Any):
    """A make() for check_lab_env: the entry's adapter builds an env of n bodies (free players in order)."""
    spec = EnvSpec(max_frame=10**9, **entry)
    adapter = adapter_for(spec)
    plan = None
    if adapter.body_options_problem() is None:
        plan = adapter.plan([{} for _ in range(n)], [f"env[0].bodies[{i}]" for i in range(n)])

    def make() -> LabEnv:
        return adapter.build(n, Clock(max_frame=10**9), plan)

    return make


CASES = {
    "cartpole_native": (16, {"name": "CartPole-v1"}),
    "cartpole_native_max_t": (4, {"name": "CartPole-v1", "max_t": 15, "vector": "native"}),
    "cartpole_copies": (3, {"name": "CartPole-v1", "vector": "sync"}),
    "cartpole_async": (2, {"name": "CartPole-v1", "vector": "async"}),
    "pendulum": (2, {"name": "Pendulum-v1", "max_t": 20}),
    "frozenlake": (2, {"name": "FrozenLake-v1"}),
    "blackjack": (2, {"name": "Blackjack-v1"}),
    **{f"space_{o}_{a}": (2, {"name": SPACE_ENV, "kwargs": {"obs": o, "act": a}})
       for o, a in [("multidiscrete", "multidiscrete"), ("multibinary", "multibinary"), ("dict", "box"),
                    ("tuple", "discrete"), ("image", "discrete")]},
    "connect_four": (2, {"name": "connect_four"}),
    "connect_four_parallel": (2, {"name": "connect_four_parallel"}),
    "connect_four_batch": (8, {"name": "connect_four_batch", "max_t": 30}),
    "tag_arena": (4, {"name": "tag_arena", "max_t": 25}),
    "tictactoe_v3": (2, {"name": "pettingzoo.classic.tictactoe_v3:env"}),
    "rps_v2": (2, {"name": "pettingzoo.classic.rps_v2:parallel_env"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_kind_and_game_passes_check_lab_env(case: str) -> None:
    n, entry = CASES[case]
    check_lab_env(maker(n, **entry), steps=200)


def test_a_remote_env_passes_check_lab_env() -> None:
    from slm_lab_like.remote import serve, shutdown

    address = serve(lambda: make_gym("FrozenLake-v1"))
    try:
        check_lab_env(maker(2, name="FrozenLake-v1", remote=address), steps=60)
    finally:
        shutdown(address)


class _Broken(GymVectorEnv):
    """CartPole copies with one promise broken, chosen by `fault`."""

    fault = ""

    def step(self) -> None:
        if self.fault == "writes_current_obs":
            self.block.obs[self.parity][:] = 0.5
        super().step()
        if self.fault == "miscounts_frames":
            self.clock.frame += 1
        if self.fault == "drops_episode_ends":
            self.flush_ends().clear()
        if self.fault == "wrong_return" and self.flush_ends():
            self.ended.ret[0] += 1.0


@pytest.mark.parametrize("fault,message", [
    ("writes_current_obs", "wrote into obs\\[parity\\]"),
    ("miscounts_frames", "the clock counted"),
    ("drops_episode_ends", "disagree with the episode ends"),
    ("wrong_return", "EpisodeEnd.ret"),
])
def test_check_lab_env_names_each_broken_promise(fault: str, message: str) -> None:
    cls = type(f"Broken_{fault}", (_Broken,), {"fault": fault})
    with pytest.raises(LabEnvCheckError, match=message):
        check_lab_env(lambda: cls("CartPole-v1", lambda: make_gym("CartPole-v1"), 2, Clock(max_frame=10**9)))


def test_check_lab_env_catches_an_unseeded_env() -> None:
    class Unseeded(GymVectorEnv):
        def reset(self, seed: int | None = None) -> None:
            super().reset(seed=int(np.random.SeedSequence().generate_state(1)[0]))

    with pytest.raises(LabEnvCheckError, match="not deterministic"):
        check_lab_env(lambda: Unseeded("CartPole-v1", lambda: make_gym("CartPole-v1"), 1, Clock(max_frame=10**9)))


class _Tiny(LabEnv):
    """A LabEnv of three-step episodes with legal-action masks (one action illegal in turn), with one promise broken
    by `fault`: the faults a user's own LabEnv made when written from docs/write-a-lab-env.md."""

    fault = ""

    def __init__(self, name: str, n_slots: int, clock: Clock, max_t: int | None = None) -> None:
        from gymnasium import spaces

        from slm_lab_like.envs.base import SlotBlock

        block = SlotBlock(0, n_slots, spaces.Box(0.0, 1.0, (3,), np.float32), spaces.Discrete(3), where=name)
        block.add_action_masks(3)
        super().__init__(name, clock, [block])
        self.block, self.t, self.closed = block, np.zeros(n_slots, np.int64), False

    def _write(self, parity: int, rows: Any = slice(None)) -> None:
        b = self.block
        obs = b.obs[parity]
        obs[rows] = 0.0
        obs[np.arange(b.size)[rows], self.t[rows]] = 1.0
        b.action_mask[parity][rows] = self.fault != "no_legal_action"
        b.action_mask[parity][np.arange(b.size)[rows], self.t[rows]] = False

    def reset(self, seed: int | None = None) -> None:
        self.t[:] = 0
        self._write(1 - self.parity if self.fault == "reset_writes_next_obs" else self.parity)

    def step(self) -> None:
        b, p = self.block, self.parity
        self.t += 1
        done = self.t == 3
        if self.fault == "replaces_reward":
            b.reward = np.where(done, 1.0, 0.0).astype(np.float32)
        else:
            b.reward[:] = np.where(done, 1.0, 0.0)
        b.terminated[:], b.truncated[:] = done, False
        ended = np.flatnonzero(done)
        if len(ended):
            if self.fault != "no_final_obs":
                b.final_obs[ended] = 0.0
                b.final_obs[ended, 2] = 1.0
            self.ended.extend(ended, np.ones(len(ended)), np.full(len(ended), 3), np.zeros(len(ended), bool))
            self.t[ended] = 0
        self._write(p if self.fault == "masks_current" else 1 - p)
        if self.fault == "masks_current":
            b.obs[1 - p][...] = b.obs[p]
            b.obs[p][...] = 0.0
            b.obs[p][:, 0] = 1.0
        self.parity = 1 - p
        self.clock.frame += b.size

    def close(self) -> None:
        if self.closed and self.fault == "close_twice_fails":
            raise RuntimeError("already closed")
        self.closed = True


@pytest.mark.parametrize("fault,message", [
    ("", None),
    ("replaces_reward", r"step .* replaced its reward array; write into it in place \(reward\[\.\.\.\] = \.\.\.\)"),
    ("reset_writes_next_obs", r"slot 0 after reset: observation array\(\[nan, nan, nan\]"),
    ("no_final_obs", r"slot 0 at step 3: final_obs array\(\[nan, nan, nan\]"),
    ("no_legal_action", r"slot 0 after reset: acting with no legal action"),
    ("masks_current", r"wrote into (obs|action_mask)\[parity\]"),
    ("close_twice_fails", r"a second close\(\) raised RuntimeError: already closed"),
])
def test_check_lab_env_catches_what_a_users_env_got_wrong(fault: str, message: str | None) -> None:
    cls = type(f"Tiny_{fault}", (_Tiny,), {"fault": fault})
    if message is None:
        check_lab_env(lambda: cls("tiny", 4, Clock(max_frame=10**9)), steps=12)
        return
    with pytest.raises(LabEnvCheckError, match=message):
        check_lab_env(lambda: cls("tiny", 4, Clock(max_frame=10**9)), steps=12)
