"""Built-in multi-agent games (numpy, seeded, fast), each offered through the PettingZoo API.

- ``connect_four``: two-player zero-sum board game with legal-action masks (AEC and parallel views).
- ``tag_arena``: simultaneous-move pursuit-evasion gridworld whose players are registry entities.
- ``spread``: cooperative navigation (MPE's simple_spread kind): N agents cover N landmarks, shared reward.

PettingZoo is an optional extra: the pure games (``ConnectFour``, ``TagWorld``) work without it; the env
classes raise an ImportError with the install hint when it is missing.
"""
from slm_lab_like.envs.games.connect_four import (
    ConnectFour,
    ConnectFourEnv,
    ConnectFourParallelEnv,
    RandomPlayer,
    WinBlockPlayer,
    random_legal_action,
)
from slm_lab_like.envs.games.spread import SpreadEnv, SpreadWorld
from slm_lab_like.envs.games.tag_arena import ENTITY_SPACE as TAG_ARENA_ENTITY_SPACE
from slm_lab_like.envs.games.tag_arena import TagArenaEnv, TagWorld

__all__ = [
    "ConnectFour",
    "ConnectFourEnv",
    "ConnectFourParallelEnv",
    "RandomPlayer",
    "SpreadEnv",
    "SpreadWorld",
    "TAG_ARENA_ENTITY_SPACE",
    "TagArenaEnv",
    "TagWorld",
    "WinBlockPlayer",
    "random_legal_action",
]
