"""Algorithms, memories and networks. Importing this package registers every built-in algorithm."""
from agents import random_agent  # noqa: F401  (registers Random)
from agents.base import AgentContext, Algorithm, BodyGroup, ComponentSpec, Transition
from agents.registry import ALGORITHMS, MEMORIES, NETS

__all__ = ["AgentContext", "Algorithm", "BodyGroup", "ComponentSpec", "Transition", "ALGORITHMS", "MEMORIES", "NETS"]
