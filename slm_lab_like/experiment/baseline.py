"""What a search judges each agent-env pair against: the measured return of random actions and the
threshold to reach (the env's `target_return`, else gymnasium's registered `reward_threshold`, else none)."""
from __future__ import annotations

import dataclasses
import json
import logging

import numpy as np

from slm_lab_like.agents.base import ComponentSpec, NoConfig
from slm_lab_like.analysis.fitness import Reference
from slm_lab_like.analysis.metrics import pair_returns
from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.schema import EnvSpec, Spec
from slm_lab_like.spec.validate import to_plain

BASELINE_EPISODES = 100
BASELINE_SEED = 0
_CACHE: dict[str, dict[tuple[int, int], float]] = {}


def random_spec(spec: Spec) -> Spec:
    """The spec with every agent acting at random, each env run for BASELINE_EPISODES episodes, one session."""
    agents = [dataclasses.replace(a, algorithm=ComponentSpec("Random", NoConfig()), memory=None, net=None,
                                  opponent_pool=None) for a in spec.agent]
    envs = [dataclasses.replace(e, max_frame=None, max_episode=BASELINE_EPISODES, target_return=None)
            for e in spec.env]
    meta = dataclasses.replace(spec.meta, max_session=1, log_frequency=10**12)
    return dataclasses.replace(spec, name=f"{spec.name}_random", agent=agents, env=envs, meta=meta, search={})


def random_returns(spec: Spec) -> dict[tuple[int, int], float]:
    """Mean episode return per agent-env pair under random actions: measured once per env set-up, then cached."""
    base = random_spec(spec)
    key = json.dumps([to_plain(base.env), to_plain(base.body), len(base.agent)], sort_keys=True, default=str)
    if key not in _CACHE:
        logger = logging.getLogger("slm_lab_like")
        level = logger.level
        logger.setLevel(max(level, logging.WARNING))  # a baseline is not a run of the user's: no progress lines
        try:
            result = Session(base, seed=BASELINE_SEED).run()
        finally:
            logger.setLevel(level)
        pairs = sorted({c[:2] for c in result.metrics})
        _CACHE[key] = {(a, e): float(np.mean([r[1] for r in pair_returns(result.metrics, a, e)] or [0.0]))
                       for a, e in pairs}
    return _CACHE[key]


def threshold(env: EnvSpec) -> float | None:
    """The return a run should reach: the env's target_return, else gymnasium's reward_threshold, else None."""
    if env.target_return is not None:
        return env.target_return
    import gymnasium as gym

    try:
        return gym.spec(env.name).reward_threshold
    except gym.error.Error:
        return None


def references(spec: Spec) -> dict[tuple[int, int], Reference]:
    """The Reference (random return, threshold) of every agent-env pair of the spec."""
    return {(a, e): Reference(ret, threshold(spec.env[e])) for (a, e), ret in random_returns(spec).items()}
