"""Episode metrics: the session's columnar log of finished episodes (filled from arrays in the hot loop), and each
body's rows with their 100-episode moving mean, made from it where the analysis reads them."""
from __future__ import annotations

import csv
import io
import math
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from slm_lab_like.analysis.atomic import write_text

COLUMNS = ("frame", "episode", "t", "return", "mean_return_100", "env_frame", "opt_step", "loss", "wall_time", "fps")
WALL_COLUMNS = ("wall_time", "fps")
WINDOW = 100


@dataclass
class BodyMetrics:
    """Episode rows of one body; `frame` counts this body's own steps."""

    coord: tuple[int, int, int]
    rows: list[dict] = field(default_factory=list)
    window: deque = field(default_factory=lambda: deque(maxlen=WINDOW))

    def add(self, frame: int, t: int, ret: float, env_frame: int, opt_step: int, loss: float,
            wall_time: float, fps: float) -> None:
        """Record one finished episode."""
        self.window.append(ret)
        self.rows.append({
            "frame": frame, "episode": len(self.rows) + 1, "t": t, "return": ret,
            "mean_return_100": sum(self.window) / len(self.window), "env_frame": env_frame,
            "opt_step": opt_step, "loss": loss, "wall_time": round(wall_time, 4), "fps": round(fps, 1),
        })

    @classmethod
    def from_rows(cls, coord: tuple[int, int, int], rows: list[dict]) -> "BodyMetrics":
        """A body's metrics continued from rows read back (its CSV): the moving window refilled from them."""
        metrics = cls(coord, rows)
        metrics.window.extend(r["return"] for r in rows[-WINDOW:])
        return metrics

    @property
    def mean_return(self) -> float:
        """Mean of the last 100 returns (nan before the first episode ends)."""
        return sum(self.window) / len(self.window) if self.window else math.nan

    def write_csv(self, path: Path) -> None:
        """The rows as a CSV file, written atomically."""
        write_text(path, to_csv(self.rows))


def to_csv(rows: Iterable[dict]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _fmt(v) for k, v in row.items()})
    return buf.getvalue()


def _fmt(v: object) -> object:
    return repr(v) if isinstance(v, float) else v


def read_csv(path: Path) -> list[dict]:
    """Rows of a metrics CSV with numbers parsed back."""
    with open(path, newline="") as f:
        return [{k: (float(v) if k in ("return", "mean_return_100", "loss", "wall_time", "fps") else int(v))
                 for k, v in row.items()} for row in csv.DictReader(f)]


def pair_returns(metrics: Mapping[tuple[int, int, int], BodyMetrics], a: int,
                 e: int) -> list[tuple[int, float, float, float]]:
    """Episodes of agent a's bodies in env e, merged in env-frame order:
    (env_frame, return, moving mean over the last 100 of them, wall time)."""
    merged = sorted((r["env_frame"], r["return"], r["wall_time"])
                    for c, m in metrics.items() if c[:2] == (a, e) for r in m.rows)
    window: deque = deque(maxlen=WINDOW)
    out = []
    for env_frame, ret, wall in merged:
        window.append(ret)
        out.append((env_frame, ret, sum(window) / len(window), wall))
    return out


class EpisodeLog:
    """Every body's finished episodes in a session, kept as the chunks of arrays the loop hands over (appending one
    is O(1): no per-body Python and no per-field copies in the loop), joined into columns when read.

    Bodies are indices into `coords`. `pair_mean` gives an agent-env pair's last-100 mean (for progress lines);
    `body_metrics()` turns the columns into per-body rows (episode numbers, 100-episode moving
    means) for files, plots and the analysis.
    """

    FIELDS = ("body", "frame", "t", "return", "env_frame", "opt_step", "loss", "wall_time", "fps")
    _DTYPES = (np.int64, np.int64, np.int64, np.float64, np.int64, np.int64, np.float64, np.float64, np.float64)

    def __init__(self, coords: Sequence[tuple[int, int, int]]) -> None:
        self.coords = list(coords)
        self.pairs = sorted({(c[0], c[1]) for c in self.coords})
        self.pair_of = np.array([self.pairs.index((c[0], c[1])) for c in self.coords], np.int64)
        self.chunks: list[tuple] = []
        self.n = 0
        self._joined: dict[str, np.ndarray] | None = None

    def add(self, bodies: np.ndarray, frame: np.ndarray, t: np.ndarray, ret: np.ndarray, env_frame: int,
            opt_step: np.ndarray | int, loss: np.ndarray | float, wall_time: float, fps: float) -> None:
        """Episodes that just ended, one entry per body index in `bodies` in the order they ended; arrays are kept,
        not copied (pass arrays the caller will not write again); per-episode fields may be scalars."""
        self.chunks.append((bodies, frame, t, ret, env_frame, opt_step, loss, wall_time, fps))
        self.n += len(bodies)
        self._joined = None

    def columns(self) -> dict[str, np.ndarray]:
        """Every field of every episode so far, in the order they ended."""
        if self._joined is None:
            sizes = np.array([len(c[0]) for c in self.chunks], np.int64)
            self._joined = {f: self._join(k, d, sizes) for k, (f, d) in enumerate(zip(self.FIELDS, self._DTYPES))}
            self._joined["wall_time"] = np.round(self._joined["wall_time"], 4)
            self._joined["fps"] = np.round(self._joined["fps"], 1)
            self.chunks = [tuple(self._joined[f] for f in self.FIELDS)] if self.n else []
        return self._joined

    def _join(self, k: int, dtype: type, sizes: np.ndarray) -> np.ndarray:
        """Field k of every chunk as one column (a scalar field of a chunk stands for each of its episodes)."""
        parts = [c[k] for c in self.chunks]
        if all(np.ndim(v) == 0 for v in parts):
            return np.repeat(np.asarray(parts, dtype), sizes)
        return np.concatenate([np.asarray(v, dtype) if np.ndim(v) else np.full(n, v, dtype)
                               for v, n in zip(parts, sizes.tolist())]) if parts else np.zeros(0, dtype)

    def pair_mean(self, pair: tuple[int, int]) -> tuple[int, float]:
        """(episodes in the window, their mean return) of an agent-env pair's last 100 (nan before any)."""
        cols = self.columns()
        window = cols["return"][self.pair_of[cols["body"]] == self.pairs.index(pair)][-WINDOW:]
        return len(window), float(window.mean()) if len(window) else math.nan

    def body_metrics(self) -> dict[tuple[int, int, int], "BodyMetrics"]:
        """Each body's rows (frame, episode, t, return, mean_return_100, ...) as the analysis and files read them."""
        cols = self.columns()
        bodies = cols["body"]
        order = np.argsort(bodies, kind="stable")
        bounds = np.searchsorted(bodies[order], np.arange(len(self.coords) + 1))
        lists = {f: cols[f][order].tolist() for f in self.FIELDS if f != "body"}
        out = {}
        for i, coord in enumerate(self.coords):
            m = BodyMetrics(coord)
            for j in range(int(bounds[i]), int(bounds[i + 1])):
                m.add(lists["frame"][j], lists["t"][j], lists["return"][j], lists["env_frame"][j],
                      lists["opt_step"][j], lists["loss"][j], lists["wall_time"][j], lists["fps"][j])
            out[coord] = m
        return out

    @classmethod
    def from_metrics(cls, coords: Sequence[tuple[int, int, int]],
                     metrics: Mapping[tuple[int, int, int], "BodyMetrics"]) -> "EpisodeLog":
        """A log continued from per-body rows (a resumed run's), in env-frame order across bodies."""
        log = cls(coords)
        index = {c: i for i, c in enumerate(log.coords)}
        rows = sorted((r["env_frame"], index[c], k, r) for c, m in metrics.items() for k, r in enumerate(m.rows))
        if rows:
            cols = {f: np.array([r[f] if f != "body" else b for _, b, _, r in rows], d)
                    for f, d in zip(cls.FIELDS, cls._DTYPES)}
            log.add(*(cols[f] for f in cls.FIELDS))
        return log
