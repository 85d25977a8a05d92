"""The session loop of DESIGN.md §2: one seed, one AEB space, stepped until every env spends its budget.

The loop is the same for (1,1,1) and for N agents x M envs x B bodies: agents act on views of the
env buffers group by group, envs step all their slots at once, agents update on the same views.
"""
from __future__ import annotations

import logging
from functools import partial
import sys
import time
from collections import deque
from pathlib import Path
from typing import Callable

import numpy as np

from envs.base import LabEnv
from slm_lab_like.aeb.space import AEBSpace
from slm_lab_like.analysis.atomic import write_json, write_with
from slm_lab_like.analysis.metrics import WINDOW, BodyMetrics, EpisodeLog
from slm_lab_like.analysis.results import SessionResult
from slm_lab_like.experiment.checkpoint import Checkpoint, read_checkpoint, restore, resume_seed, write_checkpoint
from slm_lab_like.spec.coords import Coord
from slm_lab_like.spec.schema import Spec

log = logging.getLogger("slm_lab_like")


class Session:
    """One run of the loop with one seed; writes its metrics under `out_dir` when given.

    `on_progress(frame, wall, metrics)`, when given, is called with each progress line (every
    `meta.log_frequency` frames and at the end); a search reports through it, and may stop the session
    by raising from it.

    With `out_dir`, a checkpoint (see experiment.checkpoint) is written every `meta.checkpoint_frequency`
    frames and at the end. `resume=True` continues from the last checkpoint in `out_dir`: agents, memories,
    clocks and metric rows are restored, every env starts a fresh episode (an episode cut by the checkpoint
    is discarded: its frames stay counted, it has no row) and the run is re-seeded from (seed, frame).
    """

    def __init__(self, spec: Spec, index: int = 0, seed: int = 0, out_dir: Path | None = None,
                 on_progress: Callable[[int, float, dict[Coord, BodyMetrics]], None] | None = None,
                 resume: bool = False) -> None:
        self.spec = spec
        self.index = index
        self.seed = seed
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.on_progress = on_progress
        self.resume = resume
        self.resumes: list[dict] = []

    def run(self) -> SessionResult:
        """Build the space, run the loop to the end of every env's budget, save and return the results."""
        import torch

        ckpt = read_checkpoint(self.out_dir) if self.resume and self.out_dir is not None else None
        seed = self.seed if ckpt is None else resume_seed(self.seed, ckpt.session_frame)
        torch.manual_seed(seed)
        space = AEBSpace.build(self.spec, seed)
        try:
            result = self.run_space(space, seed, ckpt)
            if self.out_dir is not None:
                self.save(result, space)
        finally:
            space.close()
        return result

    def run_space(self, space: AEBSpace, seed: int | None = None, ckpt: Checkpoint | None = None) -> SessionResult:
        """Run a built space to the end of its budget: from the start, or from `ckpt` (loaded here) with `seed`."""
        seed = self.seed if seed is None else seed
        envs = space.env_space.envs
        if ckpt is not None:
            self.resumes = ckpt.resumes + [ckpt.resume_point]
        log = (EpisodeLog(space.coords) if ckpt is None
               else EpisodeLog.from_metrics(space.coords, restore(ckpt, space, self.out_dir)))
        book = EpisodeBook(space, self.spec, log)
        space.env_space.reset(seed)
        live = LiveSet(space)
        session_frame = 0 if ckpt is None else ckpt.session_frame
        log_every = self.spec.meta.log_frequency
        next_log = session_frame + log_every
        ckpt_every = self.spec.meta.checkpoint_frequency if self.out_dir is not None else None
        next_ckpt = session_frame + ckpt_every if ckpt_every else sys.maxsize
        parity = 0
        start = time.perf_counter() - (0.0 if ckpt is None else ckpt.wall_time)
        while live.envs:
            live.step(parity)
            parity ^= 1
            session_frame += live.frames_per_step
            if book.record(live.envs, start):
                live.retire()
            if session_frame >= next_log:
                next_log = session_frame + log_every
                self._progress(sum(e.clock.frame for e in envs), time.perf_counter() - start, book)
            if session_frame >= next_ckpt and live.envs:
                next_ckpt = session_frame + ckpt_every
                self._checkpoint(space, book.metrics, session_frame, time.perf_counter() - start, False)
        wall = time.perf_counter() - start
        if session_frame + log_every != next_log:
            self._progress(sum(e.clock.frame for e in envs), wall, book)
        metrics = book.metrics
        if self.out_dir is not None:
            self._checkpoint(space, metrics, session_frame, wall, True)
        return SessionResult(
            spec_name=self.spec.name, index=self.index, seed=self.seed,
            env_frames=[e.clock.frame for e in envs], env_episodes=[e.clock.epi for e in envs],
            metrics=metrics, wall_time=wall, agent_names=[a.name for a in self.spec.agent],
            env_names=[e.name for e in self.spec.env], out_dir=self.out_dir)

    def _progress(self, frame: int, wall: float, book: EpisodeBook) -> None:
        """One progress line: frames, fps, and the latest mean return per body (per agent-env pair when many)."""
        episodes = book.log
        if len(episodes.coords) <= 8:
            parts = [f"{'a%de%db%d' % c}: {m.mean_return:.1f}" for c, m in sorted(book.metrics.items())]
        else:
            parts = [f"a{a}e{e}: {episodes.pair_mean((a, e))[1]:.1f}" for a, e in episodes.pairs]
        fps = frame / wall if wall > 0 else 0.0
        log.info("%s s%d | frame %d | fps %.0f | %s", self.spec.name, self.index, frame, fps, " ".join(parts))
        if self.on_progress is not None:
            self.on_progress(frame, wall, book.metrics)

    def _checkpoint(self, space: AEBSpace, metrics: dict[Coord, BodyMetrics], session_frame: int, wall: float,
                    finished: bool) -> None:
        """Write and commit a checkpoint of the session now."""
        assert self.out_dir is not None
        write_checkpoint(self.out_dir, space, metrics, seed=self.seed, session_frame=session_frame, wall_time=wall,
                         memory=self.spec.meta.checkpoint_memory, finished=finished, resumes=self.resumes)
        log.debug("%s s%d | checkpoint at frame %d", self.spec.name, self.index, session_frame)

    def save(self, result: SessionResult, space: AEBSpace) -> None:
        """Per-body metrics CSVs, a summary JSON, a returns plot and each agent's checkpoint, written atomically."""
        from agents.checkpoint import save_agent
        from slm_lab_like.analysis.plots import session_plot

        assert self.out_dir is not None
        for a, agent in enumerate(space.agent_space.agents):
            write_with(self.out_dir / f"agent_a{a}.pt", partial(save_agent, agent))
        for (a, e, b), m in result.metrics.items():
            m.write_csv(self.out_dir / f"metrics_a{a}_e{e}_b{b}.csv")
        write_json(self.out_dir / "summary.json", result.summary())
        session_plot(result, self.out_dir / "session_returns.png")


class LiveSet:
    """The envs that still have budget and the agent groups acting in them; one `step` of the loop steps them."""

    def __init__(self, space: AEBSpace) -> None:
        self.all_envs = space.env_space.envs
        self.all_links = space.agent_space.links
        for ln in self.all_links:
            if ln.env.clock.done:  # a resumed run whose env had spent its budget
                ln.agent.group_finished(ln.gid)
        self._refresh()

    def _refresh(self) -> None:
        self.envs = [(e, env) for e, env in enumerate(self.all_envs) if not env.clock.done]
        live = {id(env) for _, env in self.envs}
        self.links = [ln for ln in self.all_links if id(ln.env) in live]
        self.frames_per_step = sum(env.n_slots for _, env in self.envs)

    def step(self, parity: int) -> None:
        """Agents act on obs `parity`, every live env steps all its slots, agents take the transitions."""
        for ln in self.links:
            ln.act(parity)
        for _, env in self.envs:
            env.step()
        for ln in self.links:
            ln.update(parity)

    def retire(self) -> None:
        """Tell agents which of their groups' envs spent their budget, and drop those envs from the loop."""
        for ln in self.links:
            if ln.env.clock.done:
                ln.agent.group_finished(ln.gid)
        self._refresh()


class EpisodeBook:
    """Finished episodes: the session's EpisodeLog, and the last-100 window of each agent-env pair of the envs that
    have a target_return (the only envs whose episodes are looked at one by one in the loop).

    Episode ends come from each env as arrays; slot -> body and slot -> agent maps are precomputed."""

    def __init__(self, space: AEBSpace, spec: Spec, log: EpisodeLog) -> None:
        self.log = log
        self.envs = space.env_space.envs
        self.agents = space.agent_space.agents
        index = {c: i for i, c in enumerate(log.coords)}
        slots = space.env_space.slots
        self.body_of = [np.array([index[c] for c in s], np.int64) for s in slots]
        self.agent_of = [np.array([c[0] for c in s], np.int64) for s in slots]
        self.one_agent = [len({c[0] for c in s}) == 1 for s in slots]
        self.targets = [e.target_return for e in spec.env]
        self.windows = {e: {(c[0], c[1]): deque(maxlen=WINDOW) for c in slots[e]}
                        for e, target in enumerate(self.targets) if target is not None}
        cols = log.columns()
        for windows in self.windows.values():  # a resumed run's windows start where the checkpoint was
            for pair, window in windows.items():
                window.extend(cols["return"][log.pair_of[cols["body"]] == log.pairs.index(pair)][-WINDOW:].tolist())

    @property
    def metrics(self) -> dict[Coord, BodyMetrics]:
        """Each body's rows so far (made from the log: for files, progress callbacks and results)."""
        return self.log.body_metrics()

    def record(self, live: list[tuple[int, LabEnv]], start: float) -> bool:
        """Record the episodes the live envs ended this step; True when some env has now spent its budget."""
        finished = False
        for e, env in live:
            if env.ended:
                self._record_env(e, env, time.perf_counter() - start)
            finished = finished or env.clock.done
        return finished

    def _record_env(self, e: int, env: LabEnv, wall: float) -> None:
        ends = env.ended
        slots = ends.slot
        if self.one_agent[e]:
            agent = self.agents[int(self.agent_of[e][0])]
            steps, losses = agent.opt_step, agent.last_loss
        else:
            agents = self.agent_of[e][slots]
            steps = np.array([a.opt_step for a in self.agents], np.int64)[agents]
            losses = np.array([a.last_loss for a in self.agents], np.float64)[agents]
        own = ends.body_frame
        frames = np.where(own >= 0, own, env.clock.frame // env.n_slots)
        bodies = self.body_of[e][slots]
        fps = sum(x.clock.frame for x in self.envs) / wall
        self.log.add(bodies, frames, ends.length.copy(), ends.ret.copy(), env.clock.frame, steps, losses, wall, fps)
        if e in self.windows:
            self._check_target(e, env, slots, ends.ret)
        env.clock.epi += len(ends)
        ends.clear()

    def _check_target(self, e: int, env: LabEnv, slots: np.ndarray, returns: np.ndarray) -> None:
        """Push the returns into their pairs' windows; the env's budget ends once every pair's mean is on target."""
        windows = self.windows[e]
        for a, ret in zip(self.agent_of[e][slots].tolist(), returns.tolist()):
            windows[(a, e)].append(ret)
        target = self.targets[e]
        env.clock.target_reached = all(len(w) == WINDOW and sum(w) / WINDOW >= target for w in windows.values())
