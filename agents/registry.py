"""Names a spec gives its agent's parts: the lab's built-in algorithms, memories and nets by short name, and any
class of the user's by `module:Class`, as env names take it. Nothing registers on import: a built-in name maps to
its `module:Class` here and is imported when first asked for, so a user's class and a built-in one are found, and
checked, the same way."""
from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from slm_lab_like.import_path import import_object, is_import_path


class Registry:
    """One kind of part (algorithm, memory or net): built-in short names and user `module:Class` names, each resolving
    to a class that declares a `Config` dataclass and (where the kind has one) subclasses the kind's base class."""

    def __init__(self, kind: str, builtins: dict[str, str], base: str | None = None) -> None:
        self.kind = kind
        self._builtins = dict(builtins)
        self._base = base

    def get(self, name: str) -> Any:
        """The class named `name`; KeyError with a one-line reason (a did-you-mean hint for an unknown short name,
        why a `module:Class` does not import or is no part of this kind) otherwise."""
        path = self._builtins.get(name) or (name if is_import_path(name) else None)
        if path is None:
            raise KeyError(unknown_name_message(self.kind, name, self._builtins))
        try:
            cls = import_object(path)
        except ValueError as e:
            raise KeyError(f'{self.kind} "{name}": {e}') from None
        problem = self._class_problem(cls)
        if problem:
            raise KeyError(f'{self.kind} "{name}" {problem}')
        return cls

    def _class_problem(self, cls: Any) -> str | None:
        """Why `cls` cannot be a part of this kind, or None."""
        if not isinstance(cls, type):
            return f"is a {type(cls).__name__}, not a class"
        if self._base is not None:
            base = import_object(self._base)
            if not issubclass(cls, base):
                return f"is not a subclass of {self._base}"
        config = getattr(cls, "Config", None)
        if not (isinstance(config, type) and dataclasses.is_dataclass(config)):
            return "declares no Config dataclass of its settings (class attribute Config)"
        return None

    def names(self) -> list[str]:
        """The built-in short names."""
        return sorted(self._builtins)

    def __contains__(self, name: object) -> bool:
        return name in self._builtins


def unknown_name_message(kind: str, name: object, known: "dict | list") -> str:
    """One-line message for an unknown name, with a did-you-mean hint when one is close."""
    options = sorted(known)
    close = difflib.get_close_matches(str(name), options, n=1)
    hint = f'; did you mean "{close[0]}"?' if close else f"; known: {', '.join(options)}, or module:Class of your own"
    return f'unknown {kind} "{name}"{hint}'


ALGORITHMS = Registry("algorithm", {
    "Random": "slm_lab_like.agents.random_agent:Random",
    "Scripted": "slm_lab_like.agents.scripted:Scripted",
    "REINFORCE": "slm_lab_like.agents.reinforce:REINFORCE",
    "A2C": "slm_lab_like.agents.a2c:A2C",
    "PPO": "slm_lab_like.agents.ppo:PPO",
    "DQN": "slm_lab_like.agents.dqn:DQN",
    "DoubleDQN": "slm_lab_like.agents.dqn:DoubleDQN",
    "SAC": "slm_lab_like.agents.sac:SAC",
    "SARSA": "slm_lab_like.agents.sarsa:SARSA",
    "ExpertIteration": "slm_lab_like.agents.expert_iteration:ExpertIteration",
}, base="slm_lab_like.agents.base:Algorithm")
MEMORIES = Registry("memory", {
    "Replay": "slm_lab_like.agents.memory.replay:Replay",
    "PrioritizedReplay": "slm_lab_like.agents.memory.replay:PrioritizedReplay",
    "OnPolicyBatch": "slm_lab_like.agents.memory.onpolicy:OnPolicyBatch",
})
NETS = Registry("net", {
    "MLP": "slm_lab_like.agents.net.mlp:MLP",
    "ConvNet": "slm_lab_like.agents.net.conv:ConvNet",
    "Hydra": "slm_lab_like.agents.net.hydra:Hydra",
    "Recurrent": "slm_lab_like.agents.net.recurrent:Recurrent",
}, base="slm_lab_like.agents.net.base:Net")
