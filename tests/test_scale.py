"""Thousands of bodies: every algorithm and memory at 16,384 bodies and beyond, and each action space kind at the
sizes just below and above every internal chunk or buffer bound (the Random agent's batches of steps, the episode
tape's 16-bit slot keys, a replay smaller than one step of the bodies), through a real session."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from slm_lab_like.agents.random_agent import CHUNK_BYTES, BatchSampler, raw_bits_dtype
from tests.helpers import train
from tests.space_envs import ACT_KINDS, VECTOR_ID, act_space
from tests.test_spaces_session import fits

INT16_KEYS = int(np.iinfo(np.int16).max)  # envs/episodes.py and experiment/episodes.py sort 16-bit keys up to here
LENGTH = 10  # each body's episode: every body ends one at step 10


def random_bounds(act: str) -> list[int]:
    """The body counts where the Random agent's draw changes: two steps a draw at most, then one step a draw."""
    space = act_space(act)
    per_body = int(np.prod(space.shape or ())) * (raw_bits_dtype(space) or np.dtype(space.dtype)).itemsize
    return [CHUNK_BYTES // (2 * per_body), CHUNK_BYTES // per_body]


def around(bounds: list[int]) -> list[int]:
    """Each bound and one past it."""
    return sorted({b + d for b in bounds for d in (0, 1)})


def run(agent: dict, act: str, bodies: int, steps: int) -> None:
    """A session of `bodies` bodies for `steps` vector steps (the reset step after each episode end included);
    every frame counted and every body's episodes recorded."""
    raw = {"agent": [{"name": "a", **agent}],
           "env": [{"name": f"tests.space_envs:{VECTOR_ID}", "kwargs": {"act": act, "length": LENGTH},
                    "max_frame": bodies * steps}],
           "body": {"num": bodies}, "meta": {"random_seed": 0, "log_frequency": 10**9}}
    space, result = train(raw)
    assert result.env_frames == [bodies * steps]
    assert space.agent_space.agents[0].frame == bodies * steps
    episodes = steps // LENGTH
    assert result.env_episodes == [bodies * episodes]
    assert len(result.metrics) == bodies and {len(m) for m in result.metrics.values()} == {episodes}
    for m in (result.metrics[min(result.metrics)], result.metrics[max(result.metrics)]):  # the first and last body
        assert [row["t"] for row in m.rows] == [LENGTH] * episodes  # no reset step is a frame of an episode


@pytest.mark.parametrize("act", ACT_KINDS)
def test_random_actions_at_every_chunk_bound(act: str) -> None:
    keys = [INT16_KEYS] if act == "discrete" else []  # the episode tape's bound: the same for every action kind
    for bodies in around(random_bounds(act) + keys):
        run({"algorithm": {"name": "Random"}}, act, bodies, 2 * LENGTH)


@pytest.mark.parametrize("n", [2, 256, 1 << 16])
def test_the_raw_bit_draw_at_its_chunk_bounds(n: int) -> None:
    """A Discrete of 2**k actions draws a byte or two an action: its chunk bounds lie where an int64 draw's do not;
    at each, every step's actions come whole, in range, in the space's dtype, and the chunk changes size there."""
    space = gym.spaces.Discrete(n, start=1)
    bits = raw_bits_dtype(space)
    assert bits is not None
    itemsize = bits.itemsize
    for bodies in around([CHUNK_BYTES // (2 * itemsize), CHUNK_BYTES // itemsize]):
        sampler = BatchSampler(space, bodies, seed=bodies)
        assert sampler.chunk == max(1, CHUNK_BYTES // (bodies * itemsize))
        draw = iter(sampler)
        for _ in range(sampler.chunk + 1):  # past the first chunk
            actions = next(draw)
            assert actions.shape == (bodies,) and actions.dtype == space.dtype
            assert actions.min() >= 1 and actions.max() <= n


LEARNERS = {
    "REINFORCE": {},
    "A2C": {"memory": {"name": "OnPolicyBatch", "n_steps": 4}},
    "PPO": {"algorithm": {"minibatch_size": 1 << 16, "n_epochs": 1}, "memory": {"name": "OnPolicyBatch", "n_steps": 4}},
    "DQN": {"memory": {"name": "Replay", "capacity": 16_000, "batch_size": 64}},
    "DoubleDQN": {"memory": {"name": "PrioritizedReplay", "capacity": 16_000, "batch_size": 64}},
    "SAC": {"memory": {"name": "Replay", "capacity": 16_000, "batch_size": 64}},
}


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("algorithm", LEARNERS)
def test_every_learner_and_memory_at_16384_bodies_and_beyond(algorithm: str) -> None:
    """Each learner in each action space it fits, at 16,384 bodies and at 2^15 + 1 (past the 16-bit keys); the
    replays hold fewer rows than one step of the bodies."""
    extra = {"learning_starts": 1, "train_freq": 1} if "DQN" in algorithm or algorithm == "SAC" else {}
    for act in [a for a in ACT_KINDS if fits(algorithm, "box", a)]:
        for bodies in (16_384, INT16_KEYS + 2):
            agent = {**LEARNERS[algorithm], "algorithm": {"name": algorithm, **extra,
                                                           **LEARNERS[algorithm].get("algorithm", {})}}
            run(agent, act, bodies, LENGTH + 1)
