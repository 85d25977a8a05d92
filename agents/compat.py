"""Can an agent run where its bodies are? Spec validation asks `agent_problem` before anything is built, so
that `run_lab.py check` rejects an algorithm, memory or net that cannot run on the agent's spaces with one
line at the right key. The knowledge lives with each part: an Algorithm declares its `action_spaces`,
`memory_names`, `default_net` and `config_problem`; a Net its `observation_problem` and `config_problem`;
this module only asks them and adds hints (which algorithms or memories would fit).
"""
from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym

from slm_lab_like.agents.base import Algorithm, ComponentSpec
from slm_lab_like.agents.config import from_dict
from slm_lab_like.agents.net.base import net_problem
from slm_lab_like.agents.registry import ALGORITHMS, MEMORIES, NETS, Registry
from slm_lab_like.agents.schedule import schedules_problem

PREFERRED = ("PPO", "A2C", "REINFORCE", "DQN", "DoubleDQN")


def agent_problem(algorithm: ComponentSpec, memory: ComponentSpec | None, net: ComponentSpec | None,
                  signatures: Sequence[tuple[gym.Space, gym.Space]], masked: bool = False) -> tuple[str, str] | None:
    """None when the agent can run on these (observation space, action space) signatures of its body groups
    (`masked`: some group's env gives legal-action masks), else (key relative to the agent entry, such as
    "net.hid_layers", and a one-line reason with a hint)."""
    algo_cls, problem = _lookup(ALGORITHMS, algorithm.name, "algorithm.name")
    if problem:
        return problem
    declared = algo_cls.declaration_problem()
    if declared:
        return "algorithm.name", declared
    if masked and not algo_cls.takes_masks:
        fits = _learners(lambda cls: cls.takes_masks and all(cls.action_problem(a) is None for _, a in signatures))
        return "algorithm.name", (f"{algorithm.name} does not act within legal-action masks, which this env gives"
                                  + (f"; use {_either(fits)}" if fits else ""))
    together = algo_cls.signatures_problem(signatures)
    return (_action_problem(algo_cls, signatures) or (("algorithm.name", together) if together else None)
            or _memory_problem(algo_cls, memory) or _algorithm_config_problem(algo_cls, algorithm, signatures)
            or _net_problem(algo_cls, net, signatures) or _critic_optim_problem(algo_cls, algorithm, net))


def _lookup(registry: Registry, name: str, key: str) -> tuple[Any, tuple[str, str] | None]:
    """(registered class, None), or (None, (key, the registry's one-line message)) for an unknown name."""
    try:
        return registry.get(name), None
    except KeyError as e:
        return None, (key, str(e.args[0]))


def _action_problem(algo_cls: type[Algorithm], signatures: Sequence[tuple[gym.Space, gym.Space]]
                    ) -> tuple[str, str] | None:
    """The first action space the algorithm cannot act in, with the learners that can."""
    for _, space in signatures:
        problem = algo_cls.action_problem(space)
        if problem:
            fits = _learners(lambda cls, space=space: cls.action_problem(space) is None)
            kind = "continuous" if isinstance(space, gym.spaces.Box) else type(space).__name__
            hint = f"; use {_either(fits)} for {kind} actions" if fits else ""
            return "algorithm.name", problem + hint
    return None


def _memory_problem(algo_cls: type[Algorithm], memory: ComponentSpec | None) -> tuple[str, str] | None:
    """A memory the algorithm does not learn from, with the learners that do; then the memory's schedules."""
    if memory is None:
        return None
    mem_cls, problem = _lookup(MEMORIES, memory.name, "memory.name")
    if problem:
        return problem
    unused = algo_cls.memory_problem(memory.name)
    if unused:
        users = _learners(lambda cls: memory.name in cls.memory_names)
        hint = f"; {memory.name} is for {_both(users)}" if users else ""
        return "memory.name", unused + hint
    return _under("memory", schedules_problem(from_dict(mem_cls.Config, memory.config)))


def _algorithm_config_problem(algo_cls: type[Algorithm], algorithm: ComponentSpec,
                              signatures: Sequence[tuple[gym.Space, gym.Space]]) -> tuple[str, str] | None:
    """Hyperparameters the algorithm declares it would fail on, alone or on these signatures."""
    config = from_dict(algo_cls.Config, algorithm.config)
    return _under("algorithm", algo_cls.config_problem(config) or algo_cls.fit_problem(config, signatures))


def _net_problem(algo_cls: type[Algorithm], net: ComponentSpec | None,
                 signatures: Sequence[tuple[gym.Space, gym.Space]]) -> tuple[str, str] | None:
    """Whether the net (the algorithm's default when unset) takes every signature's observations and settings."""
    if algo_cls.default_net is None:
        return None if net is None else ("net.name", f"{algo_cls.__name__} builds no net; drop the net block")
    net_cls, problem = _lookup(NETS, algo_cls.default_net if net is None else net.name, "net.name")
    if problem:
        return problem
    if getattr(net_cls, "recurrent", False) and not algo_cls.takes_recurrent:
        users = _learners(lambda cls: cls.takes_recurrent)
        return "net.name", (f"net {net.name if net else ''} keeps a state per body that {algo_cls.__name__} does not "
                            f"carry; use {_either(users)}, or a feed-forward net")
    config = from_dict(net_cls.Config, None if net is None else net.config)
    for inputs in algo_cls.net_inputs(signatures):
        problem = net_problem(net_cls, config, inputs)
        if problem:
            return _under("net", problem)
    return None


def _critic_optim_problem(algo_cls: type[Algorithm], algorithm: ComponentSpec,
                          net: ComponentSpec | None) -> tuple[str, str] | None:
    """A critic optimiser set where the algorithm has no critic net of its own to give it to."""
    if net is None or getattr(net.config, "critic_optim", None) is None:
        return None
    if algo_cls.has_separate_critic(from_dict(algo_cls.Config, algorithm.config), net.config):
        return None
    return "net.critic_optim", (f"{algo_cls.__name__} so configured has no critic net of its own (a shared net, or no "
                                "critic); drop critic_optim")


def _under(prefix: str, problem: tuple[str, str] | None) -> tuple[str, str] | None:
    """A (field, reason) problem of a component, keyed from the agent entry."""
    return None if problem is None else (f"{prefix}.{problem[0]}", problem[1])


def _learners(fits: Any) -> list[str]:
    """Registered learning algorithms (those with a net) for which `fits(cls)` holds, best known first."""
    names = [n for n in ALGORITHMS.names() if ALGORITHMS.get(n).default_net is not None and fits(ALGORITHMS.get(n))]
    return sorted(names, key=lambda n: (PREFERRED.index(n) if n in PREFERRED else len(PREFERRED), n))


def _either(names: Sequence[str]) -> str:
    """'A', 'A or B', 'A, B or C'."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _both(names: Sequence[str]) -> str:
    """'A', 'A and B', 'A, B and C'."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
