"""The Random agent: uniform actions from each group's action space; the baseline every lab needs."""
from __future__ import annotations

import numpy as np

from agents.base import AgentContext, Algorithm, NoConfig
from agents.registry import ALGORITHMS


@ALGORITHMS.register("Random")
class Random(Algorithm):
    """Samples each body's action uniformly; learns nothing."""

    Config = NoConfig

    def __init__(self, config: NoConfig, ctx: AgentContext) -> None:
        super().__init__(config, ctx)
        self.spaces = [g.batch_action_space for g in self.groups]
        for i, space in enumerate(self.spaces):
            space.seed(ctx.seed + i)

    def act(self, group: int, obs: np.ndarray) -> np.ndarray:
        return self.spaces[group].sample()
