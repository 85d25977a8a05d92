"""Test helpers: a BodyGroup read off a gymnasium env, and a lab session that hands back its built space."""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from slm_lab_like.agents.base import BodyGroup
from slm_lab_like.aeb.space import AEBSpace
from slm_lab_like.analysis.results import SessionResult
from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.load import validate
from slm_lab_like.spec.schema import Spec


def make_group(env_id: str, num: int, index: int = 0) -> BodyGroup:
    """A BodyGroup for `num` bodies of `env_id` (spaces read from the env), at agent/env index `index`."""
    env = gym.make(env_id)
    group = BodyGroup(index, index, env_id, env.observation_space, env.action_space, num)
    env.close()
    return group


def train(spec: Spec | dict[str, Any], seed: int = 0) -> tuple[AEBSpace, SessionResult]:
    """Run a spec (or a raw one) through the lab's session loop; the space is returned (closed) so tests can
    read its agents."""
    spec = validate(spec, "test") if isinstance(spec, dict) else spec
    space = AEBSpace.build(spec, seed)
    try:
        result = Session(spec, seed=seed).run_space(space)
    finally:
        space.close()
    return space, result
