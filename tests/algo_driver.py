"""A tests-only driver: steps gymnasium vector envs and feeds an algorithm through act/update as the lab does.

It stands in for the lab's session loop during development and in the benchmarks: same Transition
semantics (next_obs already reset for done bodies, final_obs holding the true last observation).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import agents  # noqa: F401  (registers everything)
from agents.base import AgentContext, Algorithm, BodyGroup, ComponentSpec, Transition
from agents.config import from_dict
from agents.registry import ALGORITHMS, MEMORIES, NETS

SPEC_DIR = Path(__file__).resolve().parent.parent / "spec" / "benchmark"


def load_spec(name: str) -> dict[str, Any]:
    """A benchmark spec by file stem (e.g. "ppo_cartpole")."""
    return json.loads((SPEC_DIR / f"{name}.json").read_text())


def make_vec_env(env_id: str, num: int, seed: int) -> gym.vector.SyncVectorEnv:
    """`num` copies of `env_id` with same-step autoreset (final obs in info["final_obs"])."""
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(env_id) for _ in range(num)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    envs.action_space.seed(seed)
    return envs


def build_algo(agent_spec: dict[str, Any], groups: list[BodyGroup], seed: int) -> Algorithm:
    """Build an algorithm from a spec's agent entry, as the lab's loader would."""
    alg = dict(agent_spec["algorithm"])
    cls = ALGORITHMS.get(alg.pop("name"))

    def component(section: str, registry: Any) -> ComponentSpec | None:
        if section not in agent_spec:
            return None
        cfg = dict(agent_spec[section])
        name = cfg.pop("name")
        return ComponentSpec(name, from_dict(registry.get(name).Config, cfg))

    ctx = AgentContext(groups=groups, seed=seed, memory=component("memory", MEMORIES), net=component("net", NETS))
    return cls(from_dict(cls.Config, alg), ctx)


@dataclass
class RunResult:
    """Outcome of one driven run."""

    frames: int
    seconds: float
    returns: list[float] = field(default_factory=list)
    end_frames: list[int] = field(default_factory=list)
    solved_frame: int | None = None
    solved_seconds: float | None = None
    algo: Algorithm | None = None

    @property
    def final_mean(self) -> float:
        return float(np.mean(self.returns[-100:])) if self.returns else float("nan")

    @property
    def fps(self) -> float:
        return self.frames / self.seconds

    def curve(self, every: int, window: int = 100) -> list[tuple[int, float]]:
        """(frame, mean of the last `window` returns) every `every` frames, for reading a learning curve."""
        ends = np.asarray(self.end_frames)
        points = []
        for f in range(every, self.frames + 1, every):
            n = int(np.searchsorted(ends, f, side="right"))
            if n:
                points.append((f, float(np.mean(self.returns[max(0, n - window):n]))))
        return points


def final_obs_of(next_obs: np.ndarray, done: np.ndarray, info: dict[str, Any]) -> np.ndarray:
    """next_obs with the rows of done bodies replaced by their true last observation."""
    final = next_obs.copy()
    for i in np.flatnonzero(done):
        final[i] = info["final_obs"][i]
    return final


def run(agent_spec: dict[str, Any], env_id: str, num_envs: int, max_frames: int, seed: int,
        target: float | None = None, window: int = 100, stop_at_target: bool = True) -> RunResult:
    """Train on `num_envs` copies of `env_id` until `max_frames` or until the `window`-episode mean reaches target."""
    torch.manual_seed(seed)
    envs = make_vec_env(env_id, num_envs, seed)
    group = BodyGroup(0, 0, env_id, envs.single_observation_space, envs.single_action_space, num_envs)
    start = time.perf_counter()
    algo = build_algo(agent_spec, [group], seed)
    obs, _ = envs.reset(seed=seed)
    ep_ret = np.zeros(num_envs)
    result = RunResult(0, 0.0, algo=algo)
    frame = 0
    while frame < max_frames:
        action = algo.act(0, obs)
        next_obs, reward, term, trunc, info = envs.step(action)
        done = term | trunc
        final = final_obs_of(next_obs, done, info) if done.any() else next_obs
        algo.update(0, Transition(obs, action, reward, next_obs, term, trunc, final))
        frame += num_envs
        ep_ret += reward
        if done.any():
            result.returns.extend(ep_ret[done].tolist())
            result.end_frames.extend([frame] * int(done.sum()))
            ep_ret[done] = 0.0
            if (target is not None and result.solved_frame is None and len(result.returns) >= window
                    and np.mean(result.returns[-window:]) >= target):
                result.solved_frame, result.solved_seconds = frame, time.perf_counter() - start
                if stop_at_target:
                    break
        obs = next_obs
    algo.group_finished(0)
    result.frames, result.seconds = frame, time.perf_counter() - start
    envs.close()
    return result


def run_multi(agent_spec: dict[str, Any], env_ids: list[str], num_envs: int, max_frames: int,
              seed: int) -> tuple[Algorithm, list[list[float]]]:
    """One agent acting in several envs (one group each), stepped in turn; returns per env's episode returns."""
    torch.manual_seed(seed)
    envs = [make_vec_env(e, num_envs, seed + i) for i, e in enumerate(env_ids)]
    groups = [BodyGroup(i, i, e, v.single_observation_space, v.single_action_space, num_envs)
              for i, (e, v) in enumerate(zip(env_ids, envs))]
    algo = build_algo(agent_spec, groups, seed)
    obs = [v.reset(seed=seed + i)[0] for i, v in enumerate(envs)]
    ep_ret = [np.zeros(num_envs) for _ in envs]
    returns: list[list[float]] = [[] for _ in envs]
    for _ in range(max_frames // num_envs):
        for g, v in enumerate(envs):
            action = algo.act(g, obs[g])
            next_obs, reward, term, trunc, info = v.step(action)
            done = term | trunc
            final = final_obs_of(next_obs, done, info) if done.any() else next_obs
            algo.update(g, Transition(obs[g], action, reward, next_obs, term, trunc, final))
            ep_ret[g] += reward
            returns[g].extend(ep_ret[g][done].tolist())
            ep_ret[g][done] = 0.0
            obs[g] = next_obs
    for g, v in enumerate(envs):
        algo.group_finished(g)
        v.close()
    return algo, returns


def make_group(env_id: str, num: int, index: int = 0) -> BodyGroup:
    """A BodyGroup for `num` bodies of `env_id` (spaces read from the env)."""
    env = gym.make(env_id)
    group = BodyGroup(index, index, env_id, env.observation_space, env.action_space, num)
    env.close()
    return group


def learning_check(spec_name: str, seed: int, target: float, record: Any = None) -> RunResult:
    """Run a benchmark spec for one seed until its 100-episode training mean reaches `target` (or budget)."""
    spec = load_spec(spec_name)
    env = spec["env"][0]
    result = run(spec["agent"][0], env["name"], spec["body"]["num"], env["max_frame"], seed, target=target)
    line = (f"{spec_name} seed={seed} solved_frame={result.solved_frame} "
            f"solved_seconds={result.solved_seconds and round(result.solved_seconds, 1)} "
            f"frames={result.frames} seconds={result.seconds:.1f} final_mean={result.final_mean:.1f}")
    print(line)
    if record is not None:
        record("learning", line)
    return result
