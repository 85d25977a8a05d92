"""Bodies of a single-agent gymnasium env as copies of it, stepped as one vector.

`GymVectorEnv` steps the copies in-process with no per-step allocation beyond what the envs return
(light and fast for cheap envs); `GymAsyncVectorEnv` runs them in worker processes through
gymnasium's AsyncVectorEnv (same-step auto-reset, final observation kept) for expensive envs.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable

import gymnasium as gym
import numpy as np
from numpy import count_nonzero

from slm_lab_like.envs.base import Clock, LabEnv, SlotBlock
from slm_lab_like.envs.episodes import DROPPED, HOLD_ENDS, HOLD_STEPS, EpisodeEnds, EpisodeTape
from slm_lab_like.envs.make import peel_time_limit
from slm_lab_like.envs.spaces import lab_view



class GymVectorEnv(LabEnv):
    """`n` copies of one gymnasium env, one per body slot, auto-reset in place."""

    held: EpisodeEnds

    def __init__(self, name: str, make: Callable[[], gym.Env], n: int, clock: Clock) -> None:
        peeled = [peel_time_limit(make()) for _ in range(n)]
        self.envs = [lab_view(env, f'env "{name}"') for env, _ in peeled]
        self.max_t = peeled[0][1] or math.inf
        first = self.envs[0]
        block = SlotBlock(0, n, first.observation_space, first.action_space, where=f'env "{name}"')
        super().__init__(name, clock, [block])
        self.block = block
        self.t = [0] * n
        self.ret = [0.0] * n
        self.flagged = False  # whether some slot's terminated / truncated flag is set (cleared on the next step)
        self.buffers = [(block.obs[1 - p], block.action, block.reward) for p in (0, 1)]  # a step's, by parity
        self.held = EpisodeEnds()  # ends wait here, with their env frames, until `release_at` or HOLD_ENDS of them
        self.release_at = 0
        self._closed = False

    def reset(self, seed: int | None = None) -> None:
        self.flush_ends()
        obs = self.block.obs[self.parity]
        for i, env in enumerate(self.envs):
            obs[i], _ = env.reset(seed=None if seed is None else seed + i)
            self.t[i], self.ret[i] = 0, 0.0

    def step(self) -> None:
        t, ret, max_t = self.t, self.ret, self.max_t
        if self.flagged:  # only slots whose episode ended last step have flags to clear
            self.block.terminated[:] = self.block.truncated[:] = False
            self.flagged = False
        out, actions, reward = self.buffers[self.parity]
        frame = self.clock.frame + len(t)
        for i, env in enumerate(self.envs):  # numpy scalar actions, as gymnasium's samplers give them
            o, r, term, trunc, _ = env.step(actions[i])
            steps = t[i] = t[i] + 1
            ret[i] += float(r)
            reward[i] = r
            if term or trunc or steps >= max_t:
                o = self._end(i, o, term, trunc or steps >= max_t, frame)
            out[i] = o
        self.parity = 1 - self.parity
        self.clock.frame = frame
        if frame >= self.release_at:
            self.release_at = frame + HOLD_STEPS * len(t)
            self.held.move_to(self.ended)

    def _end(self, i: int, final: Any, term: bool, trunc: bool, frame: int) -> Any:
        """Close slot i's episode at env frame `frame` (its flags, final obs and held end) and start its next one;
        returns the next episode's first observation."""
        blk = self.block
        blk.terminated[i], blk.truncated[i] = term, trunc
        self.flagged = True
        blk.final_obs[i] = final
        self.held.append(i, self.ret[i], self.t[i], bool(trunc and not term), None, frame)
        if self.held.n >= HOLD_ENDS:
            self.release_at = frame
        self.t[i], self.ret[i] = 0, 0.0
        return self.envs[i].reset()[0]

    def render(self) -> object:
        return self.envs[0].render()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for env in self.envs:
                env.close()


def _lab_make(make: Callable[[], gym.Env], where: str) -> gym.Env:
    """A worker's env as the lab sees it (flattened observations where needed)."""
    return lab_view(make(), where)


class SameStepVectorEnv(LabEnv):
    """The bodies of an env as one gymnasium VectorEnv with SAME_STEP autoreset (`self.venv`, set by the subclass):
    a step that ends an episode returns the next one's first observation, the final one in `info["final_obs"]`."""

    venv: gym.vector.VectorEnv
    tape: EpisodeTape

    @property
    def dropped_episodes(self) -> int:
        """Episodes cut by a fault and dropped (info["_dropped"] of the venv's steps), not recorded."""
        return self.tape.dropped

    def _start(self, name: str, n: int, clock: Clock, obs_space: gym.Space) -> None:
        """The one slot block of the venv's bodies, and their episode tape."""
        block = SlotBlock(0, n, obs_space, self.venv.single_action_space, where=f'env "{name}"')
        super().__init__(name, clock, [block])
        self.block = block
        self.tape = EpisodeTape(n, self.ended)

    def _put(self, out: np.ndarray, obs: Any, rows: Any = slice(None)) -> None:
        """Write observations (an array, or a list of them for `rows`) into a slot buffer."""
        out[rows] = np.stack(obs) if isinstance(obs, list) else obs

    def reset(self, seed: int | None = None) -> None:
        obs, _ = self.venv.reset(seed=seed)
        self._put(self.block.obs[self.parity], obs)
        self.tape.restart()

    def step(self) -> None:
        blk = self.block
        obs, reward, terminated, truncated, info = self.venv.step(blk.action)
        self._put(blk.obs[1 - self.parity], obs)
        blk.reward[:] = reward
        blk.terminated[:] = terminated
        blk.truncated[:] = truncated
        self.clock.frame += blk.size
        done = self.tape.record(reward, terminated, truncated, self.clock.frame, info.get(DROPPED))
        if count_nonzero(done):
            self._put(blk.final_obs, list(info["final_obs"][done]), done)
        self.parity = 1 - self.parity


class GymAsyncVectorEnv(SameStepVectorEnv):
    """`n` copies of one gymnasium env in worker processes (gymnasium AsyncVectorEnv, same-step reset)."""

    venv: gym.vector.AsyncVectorEnv

    def __init__(self, name: str, make: Callable[[], gym.Env], n: int, clock: Clock) -> None:
        self.venv = gym.vector.AsyncVectorEnv([partial(_lab_make, make, f'env "{name}"')] * n,
                                              autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
        self._closed = False
        self._start(name, n, clock, self.venv.single_observation_space)

    def render(self) -> object:
        return self.venv.call("render")[0]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.venv.close()
