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
    window_sum: float = 0.0

    def add(self, frame: int, t: int, ret: float, env_frame: int, opt_step: int, loss: float,
            wall_time: float, fps: float) -> dict:
        """Record one finished episode; returns its row."""
        if len(self.window) == WINDOW:
            self.window_sum -= self.window[0]
        self.window.append(ret)
        self.window_sum += ret
        row = {"frame": frame, "episode": len(self.rows) + 1, "t": t, "return": ret,
               "mean_return_100": self.window_sum / len(self.window), "env_frame": env_frame,
               "opt_step": opt_step, "loss": loss, "wall_time": round(wall_time, 4), "fps": round(fps, 1)}
        self.rows.append(row)
        return row

    @classmethod
    def from_rows(cls, coord: tuple[int, int, int], rows: list[dict]) -> "BodyMetrics":
        """A body's metrics continued from rows read back (its CSV): the moving window refilled from them."""
        metrics = cls(coord, rows)
        metrics.window.extend(r["return"] for r in rows[-WINDOW:])
        metrics.window_sum = sum(metrics.window)
        return metrics

    @property
    def mean_return(self) -> float:
        """Mean of the last 100 returns (nan before the first episode ends)."""
        return self.window_sum / len(self.window) if self.window else math.nan

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
    """Episodes that ended in a session and are not yet in its per-body rows, kept as the chunks of arrays the loop
    hands over (appending one is O(1): no per-body Python and no per-field copies in the loop); `take()` joins and
    empties them. Bodies are indices into `coords`."""

    FIELDS = ("body", "frame", "t", "return", "env_frame", "opt_step", "loss", "wall_time", "fps")
    _DTYPES = (np.int64, np.int64, np.int64, np.float64, np.int64, np.int64, np.float64, np.float64, np.float64)

    def __init__(self, coords: Sequence[tuple[int, int, int]]) -> None:
        self.coords = list(coords)
        self.chunks: list[tuple] = []

    def add(self, bodies: np.ndarray, frame: np.ndarray, t: np.ndarray, ret: np.ndarray, env_frame: int,
            opt_step: np.ndarray | int, loss: np.ndarray | float, wall_time: float, fps: float) -> None:
        """Episodes that just ended, one entry per body index in `bodies` in the order they ended; arrays are kept,
        not copied (pass arrays the caller will not write again); per-episode fields may be scalars."""
        self.chunks.append((bodies, frame, t, ret, env_frame, opt_step, loss, wall_time, fps))

    def take(self) -> dict[str, np.ndarray]:
        """Every field of the waiting episodes as one column each, in the order they ended; the log is emptied."""
        sizes = np.array([len(c[0]) for c in self.chunks], np.int64)
        cols = {f: self._join(k, d, sizes) for k, (f, d) in enumerate(zip(self.FIELDS, self._DTYPES))}
        self.chunks = []
        return cols

    def _join(self, k: int, dtype: type, sizes: np.ndarray) -> np.ndarray:
        """Field k of every chunk as one column (a scalar field of a chunk stands for each of its episodes)."""
        parts = [c[k] for c in self.chunks]
        if all(np.ndim(v) == 0 for v in parts):
            return np.repeat(np.asarray(parts, dtype), sizes)
        return np.concatenate([np.asarray(v, dtype) if np.ndim(v) else np.full(n, v, dtype)
                               for v, n in zip(parts, sizes.tolist())])


class MetricFiles:
    """Each body's metrics CSV, appended with whole lines as its episodes are recorded, so a killed run keeps them."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)
        self.files: dict[tuple[int, int, int], io.TextIOBase] = {}

    def append(self, coord: tuple[int, int, int], rows: Sequence[dict]) -> None:
        """Write `rows` at the end of the body's file (its header first when the file is new or empty)."""
        f = self.files.get(coord)
        if f is None:
            path = metrics_path(self.out_dir, coord)
            f = self.files[coord] = open(path, "a", newline="")
            if f.tell() == 0:
                f.write(",".join(COLUMNS) + "\n")
        f.write("".join(",".join(str(_fmt(r[k])) for k in COLUMNS) + "\n" for r in rows))
        f.flush()

    def close(self) -> None:
        for f in self.files.values():
            f.close()
        self.files = {}


def metrics_path(session_dir: Path, coord: tuple[int, int, int]) -> Path:
    """Where a body's metrics CSV lives in a session directory."""
    return Path(session_dir) / "metrics_a{}_e{}_b{}.csv".format(*coord)
