"""Per-body episode metrics: one row per finished episode, with a 100-episode moving mean."""
from __future__ import annotations

import csv
import io
import math
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

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
