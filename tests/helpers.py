"""Test helpers: a BodyGroup read off a gymnasium env, a lab session that hands back its built space, and a CPU run's
files rewritten as a GPU run leaves them."""
from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import gymnasium as gym
import numpy as np
import torch

from slm_lab_like.agents.base import BodyGroup
from slm_lab_like.envs.games.connect_four import ConnectFour
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


def as_if_trained_on_a_gpu(trial: Path) -> None:
    """Rewrite a CPU run's files as a GPU run leaves them: every net's `gpu` true in spec.json and CUDA's generator
    state (16 bytes of Philox seed and offset) in each agent file; nets and optimisers load on the CPU either way."""
    record = json.loads((trial / "spec.json").read_text())
    for agent in record["spec"]["agent"]:
        if agent.get("net"):
            agent["net"]["config"]["gpu"] = True
    (trial / "spec.json").write_text(json.dumps(record))

    def cuda_generators(state: Any) -> Any:
        if isinstance(state, dict):
            return {k: torch.zeros(16, dtype=torch.uint8) if k == "gen" else cuda_generators(v) for k, v in state.items()}
        return [cuda_generators(v) for v in state] if isinstance(state, list) else state

    for path in trial.glob("session_*/agent_a*.pt"):
        torch.save(cuda_generators(torch.load(path, weights_only=True)), path)


@contextmanager
def first_legal_opponent(address: str, token: str) -> Iterator[None]:
    """For the block, a thread plays the seat of `token` at the judge `address`, always its first legal move."""
    from slm_lab_like.remote import RemoteEnv

    stop = threading.Event()

    def play() -> None:
        env = RemoteEnv(address, token=token, timeout=20)
        obs, _ = env.reset()
        while not stop.is_set():
            obs, _, terminated, truncated, _ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
            if terminated or truncated:
                obs, _ = env.reset()
        env.close()

    player = threading.Thread(target=play, daemon=True)
    player.start()
    try:
        yield
    finally:
        stop.set()


def game_of(moves: list[int]) -> ConnectFour:
    """A built-in connect four game after `moves` (columns, first player first)."""
    game = ConnectFour()
    for c in moves:
        game.play(c)
    return game
