"""Algorithms, memories and networks. Importing this package registers every built-in algorithm."""
from slm_lab_like.agents import memory, net  # noqa: F401  (registers memories and nets)
from slm_lab_like.agents import a2c, dqn, ppo, random_agent, reinforce, sac, scripted  # noqa: F401  (registers the algorithms)
from slm_lab_like.agents.base import AgentContext, Algorithm, BodyGroup, ComponentSpec, Transition
from slm_lab_like.agents.registry import ALGORITHMS, MEMORIES, NETS

__all__ = ["AgentContext", "Algorithm", "BodyGroup", "ComponentSpec", "Transition", "ALGORITHMS", "MEMORIES", "NETS"]
