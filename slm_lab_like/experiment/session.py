"""The session loop of DESIGN.md §2: one seed, one AEB space, stepped until every env spends its budget.

The loop is the same for (1,1,1) and for N agents x M envs x B bodies: agents act on views of the
env buffers group by group, envs step all their slots at once, agents update on the same views.
"""
from __future__ import annotations

import logging
import sys
import time
import traceback
from contextlib import ExitStack
from pathlib import Path
from typing import Callable, Mapping


from slm_lab_like.aeb.space import PART_NOTE, AEBSpace
from slm_lab_like.analysis.atomic import write_json, write_text
from slm_lab_like.analysis.metrics import BodyMetrics, SessionMetrics, metrics_path
from slm_lab_like.analysis.results import SessionResult
from slm_lab_like.experiment.allocator import keep_freed_memory
from slm_lab_like.experiment.checkpoint import (Checkpoint, read_checkpoint, restore, resume_seed, save_agents,
                                                 write_checkpoint)
from slm_lab_like.experiment.collector import freeze_loaded_objects
from slm_lab_like.experiment.episodes import EpisodeBook
from slm_lab_like.experiment.failures import SessionFailed
from slm_lab_like.experiment.interrupt import SessionInterrupted, StopRequest
from slm_lab_like.experiment.telemetry import Telemetry
from slm_lab_like.spec.coords import Coord
from slm_lab_like.spec.schema import Spec

log = logging.getLogger("slm_lab_like")
TICK_FRAMES = 2048  # session frames between looks at the clock for telemetry (files, stats, the progress bar)
ERROR_LOG = "error.log"  # in a session directory: the traceback of the error that ended the session


def _loop_part(err: BaseException) -> str | None:
    """What part of the session raised `err` (`env[0] "NAME" step`, `agent[0] "NAME" build`, ...), from the note the
    loop or the space's build added; None when neither did."""
    notes = [n for n in getattr(err, "__notes__", []) if n.startswith(PART_NOTE)]
    return notes[-1].removeprefix(PART_NOTE) if notes else None


def _one_line(err: BaseException) -> str:
    """`Type: first line of the message`, as a terminal line."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


class Session:
    """One run of the loop with one seed; writes its metrics under `out_dir` when given.

    `on_progress(frame, wall, metrics)`, when given, is called with each progress line (every
    `meta.log_frequency` frames and at the end); a search reports through it, and may stop the session
    by raising from it.

    With `out_dir`, a checkpoint (see experiment.checkpoint) is written every `meta.checkpoint_frequency`
    frames and at the end, and when the session is asked to stop (Ctrl-C, SIGTERM: `experiment.interrupt`; it then
    raises SessionInterrupted). `resume=True` continues from the last checkpoint in `out_dir`: agents, memories,
    clocks and metric rows are restored, every env starts a fresh episode (an episode cut by the checkpoint
    is discarded: its frames stay counted, it has no row) and the run is re-seeded from (seed, frame).

    `run` ends with SessionFailed (one line naming the env or agent) when an env's step or an agent's act or update
    raises; the traceback goes to error.log in `out_dir`. `run_space` lets such an error through, with a note naming
    the part of the loop that raised it.
    """

    def __init__(self, spec: Spec, index: int = 0, seed: int = 0, out_dir: Path | None = None,
                 on_progress: Callable[[int, float, Mapping[Coord, BodyMetrics]], None] | None = None,
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
        keep_freed_memory()
        freeze_loaded_objects()
        ckpt = read_checkpoint(self.out_dir) if self.resume and self.out_dir is not None else None
        seed = self.seed if ckpt is None else resume_seed(self.seed, ckpt.session_frame)
        try:
            space = AEBSpace.build(self.spec, seed)
        except Exception as err:
            what = _loop_part(err)  # an agent's or env's constructor (the space's note), or the lab's own failure
            if what is None:
                raise
            raise self._failed(err, what) from None
        try:
            result = self.run_space(space, seed, ckpt)
            if self.out_dir is not None:
                self.save(result, space)
        except Exception as err:
            what = _loop_part(err)
            if what is None:  # not the envs' or agents' (a caller's on_progress, say): as it was
                raise
            raise self._failed(err, what) from None
        finally:
            space.close()
        return result

    def _failed(self, err: Exception, part: str) -> SessionFailed:
        """The one-line error of a session whose env or agent (`part` of the loop) raised `err`; its traceback goes to
        the session's error.log (atomically) and to the debug log."""
        what = f"{part} failed: {_one_line(err)}"
        trace = "".join(traceback.format_exception(err))
        log.debug("%s s%d failed:\n%s", self.spec.name, self.index, trace)
        if self.out_dir is None:
            return SessionFailed(self.index, what)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        write_text(self.out_dir / ERROR_LOG, trace)
        return SessionFailed(self.index, f"{what} (traceback in {self.out_dir / ERROR_LOG})")

    def run_space(self, space: AEBSpace, seed: int | None = None, ckpt: Checkpoint | None = None) -> SessionResult:
        """Run a built space to the end of its budget: from the start, or from `ckpt` (loaded here) with `seed`."""
        seed = self.seed if seed is None else seed
        envs = space.env_space.envs
        if ckpt is not None:
            self.resumes = ckpt.resumes + [ckpt.resume_point]
        if ckpt is None:
            metrics = SessionMetrics(space.coords)
        elif self.out_dir is None:
            raise ValueError("resuming from a checkpoint needs the session's out_dir (its metrics are read there)")
        else:
            metrics = restore(ckpt, space, self.out_dir)
        book = EpisodeBook(space, self.spec, metrics)
        if self.out_dir is not None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        telemetry = self._telemetry(space, book)
        space.env_space.reset(seed)
        live = LiveSet(space)
        session_frame = 0 if ckpt is None else ckpt.session_frame
        ckpt_every = (self.spec.meta.checkpoint_frequency or 0) if self.out_dir is not None else 0  # 0: none
        due = Due(envs, session_frame, self.spec.meta.log_frequency, ckpt_every)
        parity = 0
        start = book.start = time.perf_counter() - (0.0 if ckpt is None else ckpt.wall_time)
        stack = ExitStack()
        try:
            stop = stack.enter_context(StopRequest())  # Ctrl-C / SIGTERM: stop at the next tick, with a checkpoint
            while live.envs:
                try:  # agents act on obs `parity`, envs step all their slots, agents update
                    for act in live.acts:
                        act(parity)
                except Exception as err:  # `act` is still the one that raised: name its agent
                    err.add_note(PART_NOTE + live.agent_of(live.acts.index(act), self.spec, "act"))
                    raise
                try:
                    for step in live.steps:
                        step()
                except Exception as err:
                    err.add_note(PART_NOTE + live.env_of(live.steps.index(step), self.spec))
                    raise
                try:
                    for update in live.updates:
                        update(parity)
                except Exception as err:
                    err.add_note(PART_NOTE + live.agent_of(live.updates.index(update), self.spec, "update"))
                    raise
                parity ^= 1
                session_frame += live.frames_per_step
                if book.record(live.envs):
                    live.retire()
                if session_frame < due.at and not stop.taken:  # a signal to this process counts at once: a
                    continue  # slow env (a judge waiting on a gone player) may take minutes to the next tick
                frame = due.frames()
                if due.tick(session_frame) or stop.taken:
                    telemetry.tick(time.perf_counter() - start, frame)
                    if stop.requested:
                        raise self._stopped(space, telemetry, book, session_frame, time.perf_counter() - start)
                if due.log(frame):
                    self._progress(telemetry, book, frame, time.perf_counter() - start)
                if due.checkpoint(frame) and live.envs:
                    self._checkpoint(space, telemetry, book.metrics, session_frame, time.perf_counter() - start,
                                     False)
                due.plan(session_frame, frame)
            wall = time.perf_counter() - start
            book.catch_up()  # the envs' unread tapes: every episode and clock.epi complete from here on
            frame = due.frames()
            if due.logged != frame:
                self._progress(telemetry, book, frame, wall)
            if self.out_dir is not None:
                self._checkpoint(space, telemetry, book.metrics, session_frame, wall, True)
        finally:
            stack.close()
            telemetry.close(due.frames())
        return SessionResult(
            spec_name=self.spec.name, index=self.index, seed=self.seed,
            env_frames=[e.clock.frame for e in envs], env_episodes=[e.clock.epi for e in envs],
            env_dropped=[e.dropped_episodes for e in envs],
            metrics=book.metrics, wall_time=wall, agent_names=[a.name for a in self.spec.agent],
            env_names=[e.name for e in self.spec.env], out_dir=self.out_dir, train=telemetry.history())

    def _stopped(self, space: AEBSpace, telemetry: Telemetry, book: EpisodeBook, session_frame: int,
                 wall: float) -> SessionInterrupted:
        """Asked to stop: a checkpoint here (with a directory), and the exception that ends the session."""
        if self.out_dir is not None:
            self._checkpoint(space, telemetry, book.metrics, session_frame, wall, False)
        log.info("%s s%d | stopped on request at frame %d", self.spec.name, self.index, session_frame)
        return SessionInterrupted(self.index, session_frame, self.out_dir is not None)

    def _telemetry(self, space: AEBSpace, book: EpisodeBook) -> Telemetry:
        """The session's live outputs: files in out_dir (TensorBoard unless meta.tensorboard is false), the bar."""
        budgets = [e.max_frame for e in self.spec.env if e.max_frame is not None]
        return Telemetry(self.spec.name, self.index, space.agent_space.agents, [a.name for a in self.spec.agent],
                         [e.name for e in self.spec.env], book, self.out_dir, self.spec.meta.tensorboard,
                         sum(budgets) if len(budgets) == len(self.spec.env) else None)

    def _progress(self, telemetry: Telemetry, book: EpisodeBook, frame: int, wall: float) -> None:
        """A progress point: telemetry's rollout scalars and line, then the caller's on_progress."""
        telemetry.point(frame, wall)
        if self.on_progress is not None:
            self.on_progress(frame, wall, book.metrics)

    def _checkpoint(self, space: AEBSpace, telemetry: Telemetry, metrics: Mapping[Coord, BodyMetrics], session_frame: int,
                    wall: float, finished: bool) -> None:
        """Write and commit a checkpoint of the session now, its episodes and train stats so far written first (the
        manifest counts them: a resume keeps exactly those)."""
        assert self.out_dir is not None
        telemetry.flush()
        write_checkpoint(self.out_dir, space, metrics, seed=self.seed, session_frame=session_frame, wall_time=wall,
                         memory=self.spec.meta.checkpoint_memory, finished=finished, resumes=self.resumes,
                         keep=self.spec.meta.checkpoint_keep)
        log.debug("%s s%d | checkpoint at frame %d", self.spec.name, self.index, session_frame)

    def save(self, result: SessionResult, space: AEBSpace) -> None:
        """A summary JSON, a returns plot and each agent's checkpoint, written atomically (the metrics CSVs were
        written as the episodes ended)."""
        from slm_lab_like.analysis.plots import session_plot

        assert self.out_dir is not None
        save_agents(self.out_dir, space)
        for coord, m in result.metrics.items():  # bodies without episodes get a file with the header only
            if not metrics_path(self.out_dir, coord).exists():
                m.write_csv(metrics_path(self.out_dir, coord))
        write_json(self.out_dir / "summary.json", result.summary())
        session_plot(result, self.out_dir / "session_returns.png")


class Due:
    """When the loop next looks at the clock: telemetry ticks every TICK_FRAMES session frames (a step's slots), and
    progress lines and checkpoints at multiples of `log_every` and `ckpt_every` env frames summed over envs, the frames
    `max_frame` and the progress lines count (a turn-based game's step counts its movers only). Env frames grow by
    at most a step's slots, so the loop compares one number a step: `at`, the session frame from which one of them
    may be due."""

    def __init__(self, envs: list, session_frame: int, log_every: int, ckpt_every: int) -> None:
        self.envs, self.log_every, self.ckpt_every = envs, log_every, ckpt_every
        frame = self.frames()
        self.logged = frame  # the frame of the last progress line (the start's, before any)
        self.next_tick, self.next_log = session_frame, after(frame, log_every)
        self.next_ckpt = after(frame, ckpt_every) if ckpt_every else sys.maxsize
        self.plan(session_frame, frame)

    def frames(self) -> int:
        return sum(e.clock.frame for e in self.envs)

    def plan(self, session_frame: int, frame: int) -> None:
        self.at = min(self.next_tick, session_frame + min(self.next_log, self.next_ckpt) - frame)

    def tick(self, session_frame: int) -> bool:
        if session_frame < self.next_tick:
            return False
        self.next_tick = session_frame + TICK_FRAMES
        return True

    def log(self, frame: int) -> bool:
        if frame < self.next_log:
            return False
        self.next_log, self.logged = after(frame, self.log_every), frame
        return True

    def checkpoint(self, frame: int) -> bool:
        if frame < self.next_ckpt:
            return False
        self.next_ckpt = after(frame, self.ckpt_every)
        return True


def after(frame: int, every: int) -> int:
    """The first multiple of `every` past `frame`: events at round frames, however far a step overshoots one."""
    return (frame // every + 1) * every


class LiveSet:
    """The envs that still have budget and the agent groups acting in them, with the calls of one loop step."""

    def __init__(self, space: AEBSpace) -> None:
        self.all_envs = space.env_space.envs
        self.all_links = space.agent_space.links
        self.agents = space.agent_space.agents
        for ln in self.all_links:
            if ln.env.clock.done:  # a resumed run whose env had spent its budget
                ln.agent.group_finished(ln.gid)
        self._refresh()

    def _refresh(self) -> None:
        self.envs = [(e, env) for e, env in enumerate(self.all_envs) if not env.clock.done]
        live = {id(env) for _, env in self.envs}
        self.links = [ln for ln in self.all_links if id(ln.env) in live]
        self.frames_per_step = sum(env.n_slots for _, env in self.envs)
        self.acts = [ln.act for ln in self.links]  # what a step of the loop calls, bound once
        self.steps = [env.step for _, env in self.envs]
        self.updates = [ln.update for ln in self.links]

    def env_of(self, k: int, spec: Spec) -> str:
        """The live env of step call `k`, named as the spec does: `env[E] "NAME" step`."""
        e = self.envs[k][0]
        return f'env[{e}] "{spec.env[e].name}" step'

    def agent_of(self, k: int, spec: Spec, call: str) -> str:
        """The agent of link `k`'s `call` (act or update), named as the spec does: `agent[A] "NAME" act`."""
        a = next(i for i, agent in enumerate(self.agents) if agent is self.links[k].agent)
        return f'agent[{a}] "{spec.agent[a].name}" {call} in env[{self.links[k].env_index}]'

    def retire(self) -> None:
        """Tell agents which of their groups' envs spent their budget, and drop those envs from the loop."""
        for ln in self.links:
            if ln.env.clock.done:
                ln.agent.group_finished(ln.gid)
        self._refresh()
