"""Episode metrics: the session's columnar log of finished episodes (filled from arrays in the hot loop), and each
body's rows with their 100-episode moving mean, made from it where the analysis reads them."""
from __future__ import annotations

import csv
import io
import math
from collections import deque
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np

from slm_lab_like.analysis.atomic import write_text
from slm_lab_like.spec.coords import Coord

COLUMNS = ("frame", "episode", "t", "return", "mean_return_100", "env_frame", "opt_step", "loss", "wall_time", "fps")
WALL_COLUMNS = ("wall_time", "fps")
WINDOW = 100
_NO_RETURNS = np.zeros(0, np.float64)


class PerChunk:
    """A column of episodes whose value is one per chunk of them (the optimizer step, loss, wall time and fps a batch of
    ends was recorded under): episode i's value is `values[chunk[i]]`. The four such fields share one 4-byte chunk
    index an episode where four 8-byte columns would be written: a session of thousands of bodies ends hundreds of
    thousands of episodes a second, and every page its kept columns first touch costs its loop a page fault."""

    __slots__ = ("values", "chunk")

    def __init__(self, values: np.ndarray, chunk: np.ndarray) -> None:
        self.values, self.chunk = values, chunk

    def __len__(self) -> int:
        return len(self.chunk)

    def take(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The values of every episode, or of the episodes `rows`."""
        return self.values[self.chunk if rows is None else self.chunk[rows]]

    def __array__(self, dtype: type | None = None, copy: bool | None = None) -> np.ndarray:
        return self.take() if dtype is None else self.take().astype(dtype, copy=False)


Column = np.ndarray | PerChunk  # a field of episodes: one value an episode, or one a chunk
Columns = Mapping[str, "Sequence | Column"]


def join_columns(parts: list) -> Column:
    """Columns of consecutive episodes as one (PerChunk columns stay PerChunk when all of them are)."""
    if not all(isinstance(p, PerChunk) for p in parts):
        return np.concatenate([p.take() if isinstance(p, PerChunk) else p for p in parts])
    offsets = np.cumsum([0, *(len(p.values) for p in parts[:-1])])
    return PerChunk(np.concatenate([p.values for p in parts]),
                    np.concatenate([p.chunk + np.int32(o) for p, o in zip(parts, offsets.tolist())]))


def array_column(cols: Columns, name: str) -> np.ndarray:
    """A field kept one value an episode (body, frame, t, return, env_frame) as the array it is."""
    col = cols[name]
    assert isinstance(col, np.ndarray), name
    return col


class _Batch:
    """Episodes of one body handed over together: entries `rows` (None: all) of the columns `cols`, numbered from
    `first`; `mean` is their moving means once BodyMetrics.fill_means has run."""

    def __init__(self, cols: Columns, rows: np.ndarray | None, first: int) -> None:
        self.cols, self.rows, self.first = cols, rows, first
        self.size = len(cols["return"]) if rows is None else len(rows)
        self.mean: np.ndarray | None = None

    def column(self, name: str, dtype: type) -> np.ndarray:
        field = self.cols[name]
        if isinstance(field, PerChunk):
            return field.take(self.rows).astype(dtype, copy=False)
        values: np.ndarray = np.asarray(field, dtype)
        return values if self.rows is None else values[self.rows]

    def columns(self) -> dict[str, np.ndarray]:
        """The batch as columns of the metrics file (COLUMNS)."""
        assert self.mean is not None
        return {"frame": self.column("frame", np.int64), "episode": np.arange(self.first, self.first + self.size),
                "t": self.column("t", np.int64), "return": self.column("return", np.float64),
                "mean_return_100": self.mean, "env_frame": self.column("env_frame", np.int64),
                "opt_step": self.column("opt_step", np.int64), "loss": self.column("loss", np.float64),
                "wall_time": np.round(self.column("wall_time", np.float64), 4),
                "fps": np.round(self.column("fps", np.float64), 1)}


class BodyMetrics:
    """Episode rows of one body; `frame` counts this body's own steps. Episodes come in as column batches and are
    kept so; their moving means are computed, and `rows` (one dict an episode) made, when something reads them."""

    def __init__(self, coord: tuple[int, int, int], rows: list[dict] | None = None) -> None:
        self.coord = coord
        self._rows: list[dict] = list(rows or [])
        self._pending: list[_Batch] = []  # batches not yet in _rows
        self._meaned = 0  # how many pending batches have their moving means
        self._before = (np.array([r["return"] for r in self._rows[-WINDOW:]], np.float64) if self._rows
                        else _NO_RETURNS)  # returns before those (one shared empty array: bodies come by thousands)
        self.n = len(self._rows)

    def add(self, frame: int, t: int, ret: float, env_frame: int, opt_step: int, loss: float,
            wall_time: float, fps: float) -> dict:
        """Record one finished episode; returns its row."""
        self.extend({"frame": [frame], "t": [t], "return": [ret], "env_frame": [env_frame],
                     "opt_step": [opt_step], "loss": [loss], "wall_time": [wall_time], "fps": [fps]})
        return self.rows[-1]

    def extend(self, cols: Columns, rows: np.ndarray | None = None) -> None:
        """Record episodes given as columns (frame, t, return, env_frame, opt_step, loss, wall_time, fps) in the
        order they ended: every entry, or the entries `rows`. The columns are kept, not copied: pass arrays
        that will not be written again."""
        batch = _Batch(cols, rows, self.n + 1)
        if batch.size:
            self._pending.append(batch)
            self.n += batch.size

    def last_columns(self) -> dict[str, np.ndarray]:
        """The last batch recorded, as columns of the metrics file (COLUMNS)."""
        self.fill_means()
        return self._pending[-1].columns()

    def fill_means(self) -> None:
        """Give every pending batch its moving means: each the sum of its own window of up to 100 returns over the
        window's length, so a mean does not depend on how episodes were batched or when this runs."""
        todo = self._pending[self._meaned:]
        if not todo:
            return
        history = np.concatenate([self._before, *(b.column("return", np.float64) for b in todo)])
        padded = np.concatenate([np.zeros(WINDOW - 1), history])
        sums = np.lib.stride_tricks.sliding_window_view(padded, WINDOW)[len(self._before):].sum(axis=1)
        means = sums / np.minimum(np.arange(len(self._before) + 1, len(history) + 1), WINDOW)
        at = 0
        for b in todo:
            b.mean = means[at:at + b.size]
            at += b.size
        self._before = history[-WINDOW:]
        self._meaned = len(self._pending)

    @property
    def rows(self) -> list[dict]:
        """Every episode's row, in the order they ended."""
        self.fill_means()
        for batch in self._pending:
            cols = batch.columns()
            lists = [cols[c].tolist() for c in COLUMNS]
            self._rows.extend(dict(zip(COLUMNS, values)) for values in zip(*lists))
        self._pending.clear()
        self._meaned = 0
        return self._rows

    def __len__(self) -> int:
        return self.n

    @classmethod
    def from_rows(cls, coord: tuple[int, int, int], rows: list[dict]) -> "BodyMetrics":
        """A body's metrics continued from rows read back (its CSV): the moving window refilled from them."""
        return cls(coord, rows)

    @property
    def mean_return(self) -> float:
        """Mean of the last 100 returns (nan before the first episode ends): the last row's moving mean."""
        self.fill_means()
        if self._pending:
            mean = self._pending[-1].mean
            assert mean is not None
            return float(mean[-1])
        return float(self._rows[-1]["mean_return_100"]) if self._rows else math.nan

    def write_csv(self, path: Path) -> None:
        """The rows as a CSV file, written atomically."""
        write_text(path, to_csv(self.rows))


class SessionMetrics(Mapping[Coord, BodyMetrics]):
    """Every body's metrics in a session, by coord. Episodes come in as the session's columns (a `body` column of
    indices into `coords`) and are split among the bodies only when something reads a body or `settle` is called
    (the metric files), and a body's BodyMetrics is made when first read: a session of thousands of bodies that
    writes no files does no per-body work while it runs."""

    def __init__(self, coords: Sequence[Coord], bodies: Mapping[Coord, BodyMetrics] | None = None) -> None:
        self.coords = list(coords)
        self.index = {c: i for i, c in enumerate(self.coords)}  # each coord's body index in the columns
        self._bodies: dict[Coord, BodyMetrics] = dict(bodies or {})
        self._waiting: list[Columns] = []

    def add(self, cols: Columns) -> None:
        """Episodes as columns (`body` and the fields BodyMetrics.extend takes), in the order they ended; kept, not
        copied."""
        if len(cols["body"]):
            self._waiting.append(cols)

    def settle(self) -> list[tuple[Coord, BodyMetrics]]:
        """Hand the waiting episodes to their bodies, one batch a body; returns the bodies that got some, in coord
        index order."""
        if not self._waiting:
            return []
        waiting, self._waiting = self._waiting, []
        cols: Columns = (waiting[0] if len(waiting) == 1 else
                         {k: join_columns([w[k] for w in waiting]) for k in waiting[0]})
        bodies = array_column(cols, "body")
        narrow = bodies.astype(np.int16) if len(self.coords) <= np.iinfo(np.int16).max else bodies
        order = np.argsort(narrow, kind="stable")  # a radix sort for 16-bit keys
        sorted_bodies = bodies[order]
        bounds = [0, *(np.flatnonzero(np.diff(sorted_bodies)) + 1).tolist(), len(order)]
        touched = []
        for lo, hi in zip(bounds, bounds[1:]):  # each body's episodes, contiguous after the sort
            coord = self.coords[int(sorted_bodies[lo])]
            body = self._body(coord)
            body.extend(cols, order[lo:hi])
            touched.append((coord, body))
        return touched

    def made(self) -> dict[Coord, BodyMetrics]:
        """The bodies made so far (read, restored or given episodes by `settle`), without making the others."""
        self.settle()
        return self._bodies

    def _body(self, coord: Coord) -> BodyMetrics:
        body = self._bodies.get(coord)
        if body is None:
            body = self._bodies[coord] = BodyMetrics(coord)
        return body

    def __getitem__(self, coord: Coord) -> BodyMetrics:
        if coord not in self.index:
            raise KeyError(coord)
        self.settle()
        return self._body(coord)

    def __contains__(self, coord: object) -> bool:
        return coord in self.index

    def __iter__(self) -> Iterator[Coord]:
        return iter(self.coords)

    def __len__(self) -> int:
        return len(self.coords)


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
    empties them. Bodies are indices into the session's coords (those of its SessionMetrics)."""

    FIELDS = ("body", "frame", "t", "return", "env_frame", "opt_step", "loss", "wall_time", "fps")
    _DTYPES = (np.int32, np.int64, np.int32, np.float64, np.int64, np.int64, np.float64, np.float64, np.float64)

    def __init__(self) -> None:
        self.chunks: list[tuple] = []

    def add(self, bodies: np.ndarray, frame: np.ndarray, t: np.ndarray, ret: np.ndarray, env_frame: np.ndarray | int,
            opt_step: np.ndarray | int, loss: np.ndarray | float, wall_time: float, fps: float) -> None:
        """Episodes that just ended, one entry per body index in `bodies` in the order they ended; arrays are kept,
        not copied (pass arrays the caller will not write again); per-episode fields may be scalars."""
        self.chunks.append((bodies, frame, t, ret, env_frame, opt_step, loss, wall_time, fps))

    def take(self) -> dict[str, Column]:
        """Every field of the waiting episodes as one column each, in the order they ended (a field that is one
        scalar a chunk in every chunk as a PerChunk column); the log is emptied."""
        chunks, self.chunks = self.chunks, []
        sizes = np.array([len(c[0]) for c in chunks], np.int64)
        index = np.repeat(np.arange(len(chunks), dtype=np.int32), sizes)  # shared by the PerChunk fields
        return {f: self._join([c[k] for c in chunks], d, sizes, index)
                for k, (f, d) in enumerate(zip(self.FIELDS, self._DTYPES))}

    @staticmethod
    def _join(parts: list, dtype: type, sizes: np.ndarray, index: np.ndarray) -> Column:
        """One field of every chunk as one column (a scalar field of a chunk stands for each of its episodes)."""
        arrays = [isinstance(v, np.ndarray) and v.ndim > 0 for v in parts]
        if not any(arrays):
            return PerChunk(np.asarray(parts, dtype), index)
        if all(arrays):
            return np.concatenate(parts, dtype=dtype)
        return np.concatenate([np.asarray(v, dtype) if is_array else np.full(n, v, dtype)
                               for v, is_array, n in zip(parts, arrays, sizes.tolist())])


class MetricFiles:
    """Each body's metrics CSV, appended with whole lines as its episodes are recorded, so a killed run keeps them."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)
        self.files: dict[tuple[int, int, int], io.TextIOBase] = {}

    def append(self, coord: tuple[int, int, int], cols: Mapping[str, np.ndarray]) -> None:
        """Write the episodes in `cols` (columns of COLUMNS, from BodyMetrics.extend) at the end of the body's file
        (its header first when the file is new or empty)."""
        f = self.files.get(coord)
        if f is None:
            path = metrics_path(self.out_dir, coord)
            f = self.files[coord] = open(path, "a", newline="")
            if f.tell() == 0:
                f.write(",".join(COLUMNS) + "\n")
        fields = [list(map(repr if cols[c].dtype.kind == "f" else str, cols[c].tolist())) for c in COLUMNS]
        f.write("".join(",".join(values) + "\n" for values in zip(*fields)))
        f.flush()

    def close(self) -> None:
        for f in self.files.values():
            f.close()
        self.files = {}


def metrics_path(session_dir: Path, coord: tuple[int, int, int]) -> Path:
    """Where a body's metrics CSV lives in a session directory."""
    return Path(session_dir) / "metrics_a{}_e{}_b{}.csv".format(*coord)
