"""The Scripted agent: a fixed policy named by `module:Class` (e.g. connect four's WinBlockPlayer), one
seeded instance per body, so a learner can face a scripted opponent through the ordinary body mapping."""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from slm_lab_like.agents.base import AgentContext, Algorithm


@dataclass
class ScriptedConfig:
    """`policy`: `module:Class` whose instances, made as Class(seed=..., **kwargs), map one observation to one
    action (e.g. slm_lab_like.envs.mcts:MCTSPlayer with kwargs {"simulations": 100}).

    With legal-action masks the policy gets a PettingZoo-style dict {"observation", "action_mask"};
    otherwise the observation array itself.
    """

    policy: str = "slm_lab_like.envs.games.connect_four:RandomPlayer"
    kwargs: dict[str, Any] = field(default_factory=dict)


def load_policy(path: str, kwargs: dict[str, Any] | None = None) -> Callable[..., Any]:
    """What makes the player named by `module:Class` as maker(seed=...): the class, or the class with `kwargs`
    bound. Tried once as maker(seed=0) for a callable player; ValueError with a one-line reason otherwise (so that a
    spec naming it is refused at check, not mid-run)."""
    module_name, _, attr = path.partition(":")
    if not attr:
        raise ValueError(f'policy "{path}" must be "module:Class"')
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f'cannot load policy "{path}": {e}') from None
    maker = functools.partial(cls, **kwargs) if kwargs else cls
    call = f"{attr}(seed=..., **{kwargs})" if kwargs else f"{attr}(seed=...)"
    try:
        player = maker(seed=0)
    except Exception as e:  # noqa: BLE001  (any way a user's class fails to build is this one-line error)
        raise ValueError(f'policy "{path}" cannot be made as {call}: {type(e).__name__}: {e}') from None
    if not callable(player):
        raise ValueError(f'policy "{path}": {call} made a {type(player).__name__}, which cannot be called '
                         "with an observation to give an action")
    return maker


class Scripted(Algorithm):
    """Acts with a scripted policy per body; learns nothing."""

    Config = ScriptedConfig

    def __init__(self, config: ScriptedConfig, ctx: AgentContext) -> None:
        super().__init__(config, ctx)
        make = load_policy(config.policy, config.kwargs)
        self.players = [[make(seed=ctx.seed + 1000 * g + i) for i in range(grp.num_bodies)]
                        for g, grp in enumerate(self.groups)]
        self.out = [np.zeros((grp.num_bodies,) + tuple(grp.action_space.shape or ()), grp.action_space.dtype)
                    for grp in self.groups]

    def act(self, group: int, obs: np.ndarray, mask: np.ndarray | None = None,
            acting: np.ndarray | None = None) -> np.ndarray:
        rows = acting
        out = self.out[group]
        players = self.players[group]
        for i in (range(len(out)) if rows is None else np.flatnonzero(rows)):
            o = obs[i] if mask is None else {"observation": obs[i], "action_mask": mask[i]}
            out[i] = players[i](o)
        return out
