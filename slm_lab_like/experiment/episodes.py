"""A session's finished episodes: recorded from the envs' arrays in the loop, turned into each body's rows (and
lines in its metrics file) when the analysis, the files or a progress line need them."""
from __future__ import annotations

import time
from collections import deque

import numpy as np

from slm_lab_like.envs.base import LabEnv
from slm_lab_like.aeb.space import AEBSpace
from slm_lab_like.analysis.metrics import WINDOW, EpisodeLog, MetricFiles, SessionMetrics, array_column
from slm_lab_like.spec.schema import Spec


class EpisodeBook:
    """Finished episodes: waiting in an EpisodeLog (arrays, no per-body Python in the loop) until `catch_up` hands
    them to the session's metrics (SessionMetrics, split by body where the metric files need them), plus the
    last-100 windows of each agent-env pair and, for envs with a target_return, windows updated every step."""

    def __init__(self, space: AEBSpace, spec: Spec, metrics: SessionMetrics) -> None:
        self.log = EpisodeLog()
        self.bodies = metrics
        self.files: MetricFiles | None = None
        self.envs = space.env_space.envs
        self.agents = space.agent_space.agents
        slots = space.env_space.slots
        self.body_of = [np.array([metrics.index[c] for c in s], np.int64) for s in slots]
        self.agent_of = [np.array([c[0] for c in s], np.int64) for s in slots]
        self.one_agent = [len({c[0] for c in s}) == 1 for s in slots]
        self.agent_index = [int(a[0]) if len(a) else 0 for a in self.agent_of]
        self.targets = [e.target_return for e in spec.env]
        self.eager = [t is not None or e.max_episode is not None or not one
                      for t, e, one in zip(self.targets, spec.env, self.one_agent)]
        self.holding = [env.holds_ends for env in self.envs]
        self.stamp_step = [a.opt_step for a in self.agents]  # each agent's optimizer step and loss before this step
        self.stamp_loss = [a.last_loss for a in self.agents]
        self.start = time.perf_counter()  # the run's wall-clock origin (the session sets it; a resume starts earlier)
        self.pair_windows: dict[tuple[int, int], deque] = {p: deque(maxlen=WINDOW) for p in
                                                            sorted({(c[0], c[1]) for c in space.coords})}
        self.pair_lengths: dict[tuple[int, int], deque] = {p: deque(maxlen=WINDOW) for p in self.pair_windows}
        self.pair_keys = list(self.pair_windows)
        pair_index = {p: i for i, p in enumerate(self.pair_keys)}
        self.pair_of_body = np.array([pair_index[c[:2]] for c in space.coords], np.int64)
        restored = metrics.made()  # a resumed run's bodies (a fresh run's are made as they are read)
        ended = sorted((r["env_frame"], c, k) for c, m in restored.items() for k, r in enumerate(m.rows))
        for _, c, k in ended:  # a resumed run's windows start where the checkpoint was
            self.pair_windows[c[:2]].append(restored[c].rows[k]["return"])
            self.pair_lengths[c[:2]].append(restored[c].rows[k]["t"])
        self.target_windows = {e: {p: self.pair_windows[p].copy() for p in self.pair_windows if p[1] == e}
                               for e, target in enumerate(self.targets) if target is not None}
        # which slots of a target env have ended an episode: the first 100 ends of many bodies are their shortest
        # episodes, not a sample of the policy, so a target counts once every body has ended one
        self.ended_once = {e: np.array([c in restored and len(restored[c]) > 0 for c in slots[e]], bool)
                           for e in self.target_windows}

    @property
    def metrics(self) -> SessionMetrics:
        """Each body's rows so far."""
        self.catch_up()
        return self.bodies

    def catch_up(self) -> None:
        """Read every env's tape, then hand the waiting episodes to the session's metrics (split by body now only
        for the metric files) and to the pair windows: one batch per body and per pair, not one call per episode."""
        for e, env in enumerate(self.envs):
            if env.flush_ends().n:
                self._record_env(e, env, time.perf_counter() - self.start)
        if not self.log.chunks:
            return
        cols = self.log.take()
        bodies, returns, lengths = (array_column(cols, f) for f in ("body", "return", "t"))
        self.bodies.add(cols)
        if self.files is not None:
            for coord, body in self.bodies.settle():
                self.files.append(coord, body.last_columns())
        pairs = self.pair_of_body[bodies] if len(self.pair_keys) > 1 else None
        for p, key in enumerate(self.pair_keys):
            mine = slice(None) if pairs is None else pairs == p
            self.pair_windows[key].extend(returns[mine][-WINDOW:].tolist())
            self.pair_lengths[key].extend(lengths[mine][-WINDOW:].tolist())

    def record(self, live: list[tuple[int, LabEnv]]) -> bool:
        """Record the episodes the live envs ended this step; True when some env has now spent its budget.

        An env that hands its ends over in batches (a tape, or held back) is read at once where the lab needs each
        end as it happens (a target return, an episode budget, several agents), or when its agent's optimizer
        stepped this step (so every row gets the optimizer step and loss its episode ended under); otherwise when
        the env hands them over."""
        finished = False
        agents, stamps = self.agents, self.stamp_step
        for e, env in live:
            if self.holding[e]:  # read at once when eager or the env's one agent stepped its optimizer, else in batches
                a = self.agent_index[e]
                if self.eager[e] or agents[a].opt_step != stamps[a]:
                    env.flush_ends()
            if env.ended.n:
                self._record_env(e, env, time.perf_counter() - self.start)
                finished = finished or env.clock.done
            else:  # without ends only frames move
                budget = env.clock.max_frame
                if budget is not None and env.clock.frame >= budget:
                    finished = True
        for a, agent in enumerate(agents):  # the optimizer moves its step and loss together
            if agent.opt_step != stamps[a]:
                stamps[a], self.stamp_loss[a] = agent.opt_step, agent.last_loss
        return finished

    def _record_env(self, e: int, env: LabEnv, wall: float) -> None:
        ends = env.ended
        slots = ends.slot
        if self.one_agent[e]:
            a = self.agent_index[e]
            steps, losses = self.stamp_step[a], self.stamp_loss[a]
        else:
            agents = self.agent_of[e][slots]
            steps = np.array(self.stamp_step, np.int64)[agents]
            losses = np.array(self.stamp_loss, np.float64)[agents]
        own, at = ends.body_frame, ends.env_frame
        env_frames = np.where(at >= 0, at, env.clock.frame)
        frames = np.where(own >= 0, own, env_frames // env.n_slots)
        bodies = self.body_of[e][slots]
        fps = sum(x.clock.frame for x in self.envs) / wall
        self.log.add(bodies, frames, ends.length.copy(), ends.ret.copy(), env_frames, steps, losses, wall, fps)
        if e in self.target_windows:
            self._check_target(e, env, slots, ends.ret)
        env.clock.epi += len(ends)
        ends.clear()

    def _check_target(self, e: int, env: LabEnv, slots: np.ndarray, returns: np.ndarray) -> None:
        """Push the returns into their pairs' windows; the env's budget ends once every pair's mean is on target and
        every body in the env has ended an episode."""
        windows = self.target_windows[e]
        for a, ret in zip(self.agent_of[e][slots].tolist(), returns.tolist()):
            windows[(a, e)].append(ret)
        seen = self.ended_once[e]
        seen[slots] = True
        target = self.targets[e]
        env.clock.target_reached = bool(seen.all()) and all(len(w) == WINDOW and sum(w) / WINDOW >= target
                                                            for w in windows.values())
