"""Where a session's numbers go while it runs, so a run is never a black box until it ends:
- each body's metrics CSV, appended as its episodes are recorded (a killed run keeps them, up to FLUSH_SECONDS);
- each agent's `train_a<A>.csv` and TensorBoard scalars (`train/...` from the algorithms' stats channel,
  `rollout/return_mean_100` and `rollout/episode_length` per agent-env pair, `time/fps`), in the session
  directory where `tensorboard --logdir data/` finds sessions, trials and searches side by side;
- a live progress bar per session on a terminal (frames / budget, fps, ETA, the latest 100-episode means), and
  plain log lines, as before, when the output is not a terminal.
The updates an agent makes between two flushes are written as one row, their mean (with their count).
"""
from __future__ import annotations

import csv
import json
import logging
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from slm_lab_like.analysis.metrics import MetricFiles

if TYPE_CHECKING:
    from slm_lab_like.agents.base import Algorithm
    from slm_lab_like.experiment.episodes import EpisodeBook

log = logging.getLogger("slm_lab_like")
FLUSH_SECONDS = 0.5
BAR_SECONDS = 0.2
KEEP_POINTS = 2000  # train points kept in memory per agent for plots (thinned by half when full)


def train_path(out_dir: Path, agent: int) -> Path:
    """Agent `agent`'s train stats CSV in a session directory."""
    return Path(out_dir) / f"train_a{agent}.csv"


class TrainLog:
    """One agent's stats: rows appended to its CSV and TensorBoard, and a thinned history for plots."""

    def __init__(self, path: Path | None, tag_suffix: str) -> None:
        self.path = path
        self.suffix = tag_suffix
        self.columns: list[str] | None = None
        self.history: list[tuple[int, dict[str, float]]] = []

    def add(self, reports: list[tuple[int, dict[str, float]]], writer: Any) -> None:
        """Write the mean of `reports` (the agent's updates since the last flush) at the frame of the last one."""
        frame = reports[-1][0]
        keys = sorted({k for _, values in reports for k in values})
        row = {k: _mean([v[k] for _, v in reports if k in v]) for k in keys}
        row["train/updates"] = float(len(reports))
        self.history.append((frame, row))
        if len(self.history) > KEEP_POINTS:
            self.history = self.history[::2]
        if writer is not None:
            for k, v in row.items():
                writer.add_scalar(k + self.suffix, v, frame)
        if self.path is not None:
            self._append(frame, row)

    def _append(self, frame: int, row: dict[str, float]) -> None:
        assert self.path is not None
        with open(self.path, "a", newline="") as f:
            if self.columns is None:
                self.columns = ["frame"] + sorted(row)
                if f.tell() == 0:
                    f.write(",".join(self.columns) + "\n")
            csv.writer(f, lineterminator="\n").writerow([frame] + [row.get(k, "") for k in self.columns[1:]])


class Telemetry:
    """A session's live outputs (see the module doc); `tick` is called every few thousand frames of the loop."""

    def __init__(self, name: str, index: int, agents: list[Algorithm], agent_names: list[str], env_names: list[str],
                 book: EpisodeBook, out_dir: Path | None, tensorboard: bool, budget: int | None) -> None:
        self.name, self.index = name, index
        self.agents, self.agent_names, self.env_names = agents, agent_names, env_names
        self.book = book
        self.out_dir = out_dir
        self.files = MetricFiles(out_dir) if out_dir is not None else None
        book.files = self.files
        self.writer = _summary_writer(out_dir) if tensorboard and out_dir is not None else None
        many = len(agents) > 1
        self.train = [TrainLog(train_path(out_dir, a) if out_dir is not None else None,
                               f"/{agent_names[a]}" if many else "") for a in range(len(agents))]
        self.bar = _progress_bar(name, index, budget)
        self.last_flush = self.last_bar = -math.inf

    def tick(self, now: float, frame: int) -> None:
        """Flush episode rows and train stats when due; move the progress bar."""
        if now - self.last_flush >= FLUSH_SECONDS:
            self.flush()
            self.last_flush = now
        if self.bar is not None and now - self.last_bar >= BAR_SECONDS:
            self.last_bar = now
            self.bar.n = frame
            self.bar.set_postfix_str(self._means(), refresh=False)
            self.bar.refresh()

    def flush(self) -> None:
        """Write the episodes and the updates recorded since the last flush."""
        self.book.catch_up()
        for agent, train in zip(self.agents, self.train):
            reports = agent.stats.drain()
            if reports:
                train.add(reports, self.writer)

    def point(self, frame: int, wall: float) -> None:
        """A progress point (every meta.log_frequency frames and at the end): rollout scalars, and a log line
        when no bar is shown."""
        self.flush()
        fps = frame / wall if wall > 0 else 0.0
        if self.writer is not None:
            many = len(self.book.pair_windows) > 1
            for (a, e), window in self.book.pair_windows.items():
                if window:
                    suffix = f"/{self.agent_names[a]}@{self.env_names[e]}" if many else ""
                    self.writer.add_scalar("rollout/return_mean_100" + suffix, float(np.mean(window)), frame)
                    lengths = self.book.pair_lengths[(a, e)]
                    self.writer.add_scalar("rollout/episode_length" + suffix, float(np.mean(lengths)), frame)
            self.writer.add_scalar("time/fps", fps, frame)
            self.writer.flush()
        if self.bar is None:
            log.info("%s s%d | frame %d | fps %.0f | %s", self.name, self.index, frame, fps, self._means())

    def _means(self) -> str:
        """The latest 100-episode mean return per body (per agent-env pair when there are many bodies)."""
        book = self.book
        if len(book.bodies) <= 8:
            return " ".join(f"{'a%de%db%d' % c}: {_shown(m.mean_return)}" for c, m in sorted(book.bodies.items()))
        return " ".join(f"a{a}e{e}: {_shown(float(np.mean(w)) if w else math.nan)}"
                        for (a, e), w in book.pair_windows.items())

    def close(self, frame: int) -> None:
        """Final flush; the bar shows where the session ended; files closed."""
        self.flush()
        if self.bar is not None:
            self.bar.n = frame
            self.bar.refresh()
            self.bar.close()
        if self.writer is not None:
            self.writer.close()
        if self.files is not None:
            self.files.close()

    def history(self) -> list[list[tuple[int, dict[str, float]]]]:
        """Each agent's train rows kept for plots."""
        return [t.history for t in self.train]


def _mean(values: list[float]) -> float:
    """The mean of the finite values (nan when there is none, e.g. a critic-less agent's explained variance)."""
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan


def _summary_writer(out_dir: Path) -> Any:
    """A TensorBoard writer of event files in the session directory."""
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(log_dir=str(out_dir), flush_secs=5)


def _progress_bar(name: str, index: int, budget: int | None) -> Any:
    """A tqdm bar on stderr when it is a terminal and info messages are shown; None otherwise."""
    if not sys.stderr.isatty() or not log.isEnabledFor(logging.INFO):
        return None
    from tqdm import tqdm

    size = os.get_terminal_size(sys.stderr.fileno())
    sized = size.columns > 0 and size.lines > 0  # a terminal that does not say its size: 100 x 24
    return tqdm(total=budget, desc=f"{name} s{index}", unit="frame", unit_scale=True, position=index,
                dynamic_ncols=sized, ncols=None if sized else 100, nrows=None if sized else 24, leave=True,
                file=sys.stderr, mininterval=BAR_SECONDS)


def write_hparams(trial_dir: Path, values: dict[str, Any], metrics: dict[str, Any]) -> None:
    """A search trial's variables and its fitness metrics for TensorBoard's hparams view, in the trial directory."""
    from torch.utils.tensorboard import SummaryWriter

    hparams = {k: v if isinstance(v, (int, float, str, bool)) else json.dumps(v) for k, v in values.items()}
    scores = {f"hparam/{k}": float(v) for k, v in metrics.items()
              if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
    with SummaryWriter(log_dir=str(trial_dir)) as writer:
        writer.add_hparams(hparams, scores, run_name=".")


def _shown(value: float) -> str:
    """A progress line's mean return: "-" until an episode has ended (not nan)."""
    return "-" if math.isnan(value) else f"{value:.1f}"
