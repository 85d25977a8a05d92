"""An env entry's bodies over the judges the lab started for it (a `JudgeSet`): a contiguous block of bodies on
each judge, in one vector session per judge, the judges stepped at once (a thread each) so that a step waits for
the slowest judge, not for their sum.

A judge that stops answering (gone with its process or node: its client's heartbeat notices within seconds; or
silent past the client timeout) is replaced by the JudgeSet and its block reset on the new judge. That step ends
the block's episodes, truncated, their last observations as final ones, and marks them dropped (info["_dropped"]):
the lab drops and counts them instead of recording returns a fault cut short. Nothing else is lost: the other
blocks step on, and the agents see an ordinary episode boundary.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import zmq
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from slm_lab_like.envs.episodes import DROPPED
from slm_lab_like.remote.placement import JudgeSet
from slm_lab_like.remote.protocol import JudgeTimeout
from slm_lab_like.remote.vector_client import RemoteVecEnv

log = logging.getLogger("slm_lab_like")
LOST = (JudgeTimeout, zmq.ZMQError)  # what a client raises when its judge is gone or silent
StepResult = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]


class JudgeShards(gym.vector.VectorEnv):
    """`n` bodies over the judges of `judges`, as one SAME_STEP vector env; `replaced` counts the judges replaced.
    Of a step's info only what the lab reads crosses: `final_obs` (with its mask) and the dropped mask; with one
    judge, its own info as it is."""

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, judges: JudgeSet, n: int, where: str, max_t: int | None = None, timeout: float = 30.0,
                 **options: Any) -> None:
        self.judges, self.where = judges, where
        bounds = np.cumsum([0] + [len(a) for a in np.array_split(np.arange(n), judges.count)])
        self.slices = [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
        self.options = {"max_t": max_t, "timeout": timeout, "retries": 0,
                        "curve_server_key": judges.curve_public_key, **options}
        self.shards: list[RemoteVecEnv] = []
        self.replaced = 0
        self._pool = ThreadPoolExecutor(judges.count, thread_name_prefix="judge-shard") if judges.count > 1 else None
        try:
            self.shards = list(self._each(self._connect))
        except BaseException:
            self.close()
            raise
        first = self.shards[0]
        self.num_envs = n
        self.single_observation_space = first.single_observation_space
        self.single_action_space = first.single_action_space
        self.observation_space = batch_space(self.single_observation_space, n)
        self.action_space = batch_space(self.single_action_space, n)
        self.env_id = first.env_id
        self._obs: np.ndarray | None = None

    def _connect(self, j: int) -> RemoteVecEnv:
        size = self.slices[j].stop - self.slices[j].start
        return RemoteVecEnv(self.judges.address(j), size, **self.options)

    def _each(self, call: Callable[[int], Any]) -> list[Any]:
        """`call(j)` for every judge, at once when there are several."""
        if self._pool is None:
            return [call(0)]
        return list(self._pool.map(call, range(len(self.slices))))

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Reset every body (body i seeded with seed + i, as one judge's copies are)."""
        def one(j: int) -> np.ndarray:
            start = self.slices[j].start
            return self.shards[j].reset(seed=None if seed is None else seed + start, options=options)[0]

        self._obs = np.concatenate(self._each(one))
        return self._obs, {}

    def step(self, actions: Any) -> StepResult:
        """Step every judge's block; a lost judge's block comes back from its replacement (module doc)."""
        def one(j: int) -> StepResult | BaseException:
            try:
                return self.shards[j].step(actions[self.slices[j]])
            except LOST as err:
                return err

        began = time.monotonic()
        results = self._each(one)
        lost = [j for j, r in enumerate(results) if isinstance(r, BaseException)]
        if lost:  # replaced at once, so a node's several judges cost one judge start, not one each
            replace = (lambda j: self._replace(j, results[j], began))
            for j, result in zip(lost, self._pool.map(replace, lost) if self._pool else map(replace, lost)):
                results[j] = result
            self.replaced += len(lost)
        if self._pool is None and not lost:
            self._obs = results[0][0]
            return results[0]
        return self._merge(results, lost)

    def _merge(self, results: list[Any], lost: list[int]) -> StepResult:
        """One step result of the blocks' results: arrays joined, final observations and dropped marks at their
        bodies."""
        obs, rewards, terminated, truncated = (np.concatenate([r[k] for r in results]) for k in range(4))
        infos: dict[str, Any] = {}
        ended = np.flatnonzero(terminated | truncated)
        if len(ended):
            final = np.empty(self.num_envs, object)
            for j, r in enumerate(results):
                info = r[4]
                if "_final_obs" in info:
                    rows = np.flatnonzero(info["_final_obs"])
                    final[rows + self.slices[j].start] = list(info["final_obs"][rows])
            mask = np.zeros(self.num_envs, bool)
            mask[ended] = True
            infos["final_obs"], infos["_final_obs"] = final, mask
        if lost:
            dropped = np.zeros(self.num_envs, bool)
            for j in lost:
                dropped[self.slices[j]] = True
            infos[DROPPED] = dropped
        self._obs = obs
        return obs, rewards, terminated, truncated, infos

    def _replace(self, j: int, err: BaseException, began: float) -> StepResult:
        """Judge j is lost: a new judge in its place, its block reset there; this step (begun at `began`) ends the
        block's episodes."""
        start = time.monotonic()
        old = self.judges.address(j)
        self.shards[j].abandon()
        address = self.judges.replace(j)
        self.shards[j] = self._connect(j)
        obs, _ = self.shards[j].reset()
        size = self.slices[j].stop - self.slices[j].start
        final = np.empty(size, object)
        if self._obs is not None:
            final[:] = list(self._obs[self.slices[j]])
        now = time.monotonic()
        log.warning("%s: judge %d at %s lost (%s); replaced by %s in %.1f s (the step took %.1f s), %d episode(s) "
                    "cut and dropped", self.where, j, old, str(err).splitlines()[0], address, now - start, now - began,
                    size)
        return (obs, np.zeros(size), np.zeros(size, bool), np.ones(size, bool),
                {"final_obs": final, "_final_obs": np.ones(size, bool)})

    def close_extras(self, **kwargs: Any) -> None:
        """Close every client, then stop the judges."""
        try:
            for shard in self.shards:
                shard.close()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
            self.judges.close()
