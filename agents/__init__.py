"""Algorithms, memories and networks, and the contract an algorithm keeps (`Algorithm`, `BodyGroup`, `Transition`,
`AgentContext`; docs/write-an-algorithm.md). A spec names a part by its built-in short name or by `module:Class`;
`ALGORITHMS`, `MEMORIES` and `NETS` resolve both, importing a part when it is first asked for."""
from slm_lab_like.agents.base import AgentContext, Algorithm, BodyGroup, ComponentSpec, Transition
from slm_lab_like.agents.registry import ALGORITHMS, MEMORIES, NETS

__all__ = ["AgentContext", "Algorithm", "BodyGroup", "ComponentSpec", "Transition", "ALGORITHMS", "MEMORIES", "NETS"]
