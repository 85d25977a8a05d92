"""Remote environments: judges host envs behind ZeroMQ and agents see a plain ``gymnasium.Env``.

Public API: :class:`RemoteEnv` (client, registered as ``slm_lab_like/Remote-v0``), :class:`RemoteVecEnv` (N
copies in one session, one round trip per step: a gymnasium VectorEnv), :class:`JudgeServer` (single-agent),
:class:`MultiJudgeServer` (PettingZoo parallel or turn-based), both on :class:`BaseJudge`; :func:`serve` /
:func:`serve_spec` / :func:`shutdown` (in-process judges), :func:`spawn_judge` (judge subprocess) and
:func:`evaluate` (hosted evaluation of submitted agents). All of them take the env names of :func:`hosting_for`
and the judge options of :mod:`slm_lab_like.remote.options`.
"""

from typing import Any

import gymnasium as gym

from slm_lab_like.remote.base import BaseJudge, resolve_env_factory
from slm_lab_like.remote.client import RemoteEnv
from slm_lab_like.remote.hosting import hosting_for, judge_for, serve, serve_spec, shutdown
from slm_lab_like.remote.multi_server import MultiJudgeServer
from slm_lab_like.remote.protocol import PROTOCOL_VERSION, JudgeTimeout, ProtocolError, RemoteError
from slm_lab_like.remote.server import JudgeServer
from slm_lab_like.remote.spawn import spawn_judge, stop_judge
from slm_lab_like.remote.vector_client import RemoteVecEnv

REMOTE_ENV_ID = "slm_lab_like/Remote-v0"

if REMOTE_ENV_ID not in gym.registry:
    gym.register(id=REMOTE_ENV_ID, entry_point="slm_lab_like.remote.client:RemoteEnv")


def __getattr__(name: str) -> Any:
    """Import the evaluation entry point lazily (it is only needed by hosts of competitions)."""
    if name == "evaluate":
        from slm_lab_like.remote.evaluate import evaluate
        return evaluate
    raise AttributeError(name)


__all__ = [
    "REMOTE_ENV_ID", "PROTOCOL_VERSION", "RemoteEnv", "RemoteVecEnv", "BaseJudge", "hosting_for", "JudgeServer", "MultiJudgeServer",
    "JudgeTimeout", "ProtocolError", "RemoteError", "serve", "serve_spec", "shutdown", "judge_for", "spawn_judge",
    "stop_judge", "resolve_env_factory", "evaluate",
]
