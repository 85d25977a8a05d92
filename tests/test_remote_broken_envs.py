"""A judge whose env breaks its own observation space tells that env's client so, as ``env_error`` naming the
mismatch (not an ``invalid_action`` the client made up reading it), and goes on serving everyone else."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from slm_lab_like.envs.adapter import EntryError
from slm_lab_like.remote import RemoteEnv, judge_for, serve, shutdown
from slm_lab_like.remote import protocol as P
from tests.broken_pettingzoo import BrokenParallel
from tests.space_envs import BrokenEnv

pytestmark = pytest.mark.timeout(60)


def test_a_judge_hosting_a_broken_env_by_name_does_not_open() -> None:
    """By name, a judge tries its env first (as `check` does) and refuses to start: one line naming what broke, for a
    gymnasium env and a PettingZoo one alike."""
    with pytest.raises(EntryError, match=r"reset\(\) returned an observation of shape \(4,\) that does not fit"):
        serve("tests.space_envs:BrokenEnv", env_kwargs={"fault": "shape"})
    with pytest.raises(EntryError, match=r"the first step raised RuntimeError: the physics engine diverged"):
        serve("tests.broken_pettingzoo:parallel_env", env_kwargs={"fault": "step_raises"})


@pytest.mark.parametrize("lane", [True, False])
def test_a_single_judge_reports_its_envs_wrong_observation(lane: bool) -> None:
    """An env given as a factory is not tried before the judge opens: its client hears what broke."""
    bad = serve(lambda: BrokenEnv("shape"))
    good = serve("CartPole-v1")
    try:
        env = RemoteEnv(bad, timeout=5, lane=lane)
        for call in (lambda: env.reset(seed=0), lambda: env.step(0)):
            with pytest.raises(P.RemoteError) as err:
                call()
            assert err.value.code == "env_error"
            assert "observation outside its observation space: expected shape (3,), got (4,)" in err.value.message
        env.close()
        fine = RemoteEnv(good, timeout=5, lane=lane)
        assert fine.reset(seed=0)[0].shape == (4,)
        fine.close()
        assert judge_for(bad).errors_sent == 2
    finally:
        shutdown(bad)
        shutdown(good)


class OneLiar(BrokenParallel):
    """Player p1's observations are 5 floats where its space says 3; p0's are right."""

    def _obs(self) -> dict[str, np.ndarray]:
        return {a: np.zeros(5 if a == "p1" else 3, np.float32) for a in self.agents}


def test_a_multi_judge_tells_only_the_body_whose_observation_is_wrong() -> None:
    address = serve(lambda: OneLiar("none"), multi=True, api="parallel")
    try:
        tokens = judge_for(address).tokens
        heard: dict[str, object] = {}

        def play(agent: str) -> None:
            env = RemoteEnv(address, token=tokens[agent], timeout=5)
            try:
                heard[agent] = env.reset(seed=0)[0].shape
            except P.RemoteError as err:
                heard[agent] = (err.code, err.message)
            env.close()

        threads = [threading.Thread(target=play, args=(agent,)) for agent in tokens]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert heard["p0"] == (3,)
        code, message = heard["p1"]  # type: ignore[misc]
        assert code == "env_error" and "expected shape (3,), got (5,)" in message
    finally:
        shutdown(address)
