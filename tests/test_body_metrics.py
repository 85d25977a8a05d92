"""BodyMetrics takes episodes in batches: each row's moving mean is its own window's mean, whatever the batching."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from slm_lab_like.analysis.metrics import WINDOW, BodyMetrics, EpisodeLog, PerChunk, SessionMetrics


def columns(rets: list[float], start: int = 0) -> dict:
    n = len(rets)
    return {"frame": np.arange(start, start + n) * 10, "t": np.full(n, 10), "return": np.array(rets),
            "env_frame": np.arange(start, start + n) * 20, "opt_step": np.full(n, 3), "loss": [0.5] * n,
            "wall_time": np.full(n, 1.234567), "fps": np.full(n, 99.96)}


def batched(rets: list[float], cuts: list[int], reads: int = 0) -> BodyMetrics:
    """A body given `rets` in batches cut at `cuts`; its means are read after the first `reads` batches."""
    m = BodyMetrics((0, 0, 0))
    edges = [0, *sorted(c % (len(rets) + 1) for c in cuts), len(rets)]
    for i, (a, b) in enumerate(zip(edges, edges[1:])):
        if b > a:
            m.extend(columns(rets[a:b], a))
        if i < reads and i % 2:
            m.fill_means()
        elif i < reads:
            assert len(m.rows) == b
    return m


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=260),
       st.lists(st.integers(0, 300), max_size=6), st.integers(0, 7))
def test_moving_means_are_their_windows_means_whatever_the_batches(rets: list[float], cuts: list[int],
                                                                   reads: int) -> None:
    one = batched(rets, [])
    many = batched(rets, cuts, reads)
    assert many.mean_return == one.mean_return
    assert one.rows == many.rows  # the same numbers to the last bit, whenever the means were computed
    for i, row in enumerate(one.rows):
        window = rets[max(0, i + 1 - WINDOW):i + 1]
        assert row["episode"] == i + 1 and row["return"] == rets[i]
        assert np.isclose(row["mean_return_100"], np.mean(window), rtol=1e-12, atol=1e-9)
    assert np.isclose(one.mean_return, np.mean(rets[-WINDOW:]))
    assert one.rows[0]["wall_time"] == 1.2346 and one.rows[0]["fps"] == 100.0 and one.rows[0]["opt_step"] == 3


def test_add_and_rows_read_back_continue_the_window() -> None:
    m = BodyMetrics((1, 0, 2))
    row = m.add(10, 10, 5.0, 20, 1, 0.25, 0.5, 40.0)
    assert row == {"frame": 10, "episode": 1, "t": 10, "return": 5.0, "mean_return_100": 5.0, "env_frame": 20,
                   "opt_step": 1, "loss": 0.25, "wall_time": 0.5, "fps": 40.0}
    resumed = BodyMetrics.from_rows((1, 0, 2), list(m.rows))
    assert resumed.add(20, 10, 7.0, 40, 2, 0.1, 1.0, 40.0)["mean_return_100"] == 6.0


def test_episode_log_joins_array_and_scalar_fields_in_end_order() -> None:
    log = EpisodeLog()
    log.add(np.array([1]), np.array([5]), np.array([5]), np.array([1.0]), 10, 2, 0.5, 0.1, 9.0)
    log.add(np.array([0, 1]), np.array([6, 7]), np.array([6, 2]), np.array([2.0, 3.0]), 12,
            np.array([3, 4]), np.array([0.25, 0.75]), 0.2, 8.0)
    cols = log.take()
    assert cols["body"].tolist() == [1, 0, 1] and np.asarray(cols["env_frame"]).tolist() == [10, 12, 12]
    assert cols["opt_step"].tolist() == [2, 3, 4] and cols["loss"].tolist() == [0.5, 0.25, 0.75]
    assert cols["return"].dtype == np.float64 and not log.chunks


def test_episode_log_keeps_scalar_fields_one_value_a_chunk() -> None:
    """Fields that every chunk gives as one scalar (the optimizer step, loss, wall time, fps of a batch of ends) are
    kept as one value a chunk and a shared 4-byte chunk index; bodies and lengths as 4-byte integers. A body's rows
    read back the same values, through the session's metrics, in one batch or several."""
    log = EpisodeLog()
    log.add(np.array([1, 0]), np.array([5, 6]), np.array([5, 6]), np.array([1.0, 2.0]), np.array([10, 12]), 2, 0.5,
            0.1, 9.0)
    log.add(np.array([1]), np.array([9]), np.array([4]), np.array([3.0]), np.array([18]), 3, 0.25, 0.2, 8.0)
    cols = log.take()
    assert all(isinstance(cols[f], PerChunk) for f in ("opt_step", "loss", "wall_time", "fps"))
    assert cols["opt_step"].chunk is cols["fps"].chunk and cols["opt_step"].chunk.dtype == np.int32
    assert cols["body"].dtype == np.int32 and cols["t"].dtype == np.int32 and cols["env_frame"].dtype == np.int64
    assert np.asarray(cols["opt_step"]).tolist() == [2, 2, 3] and np.asarray(cols["loss"]).tolist() == [0.5, 0.5, 0.25]
    metrics = SessionMetrics([(0, 0, 0), (0, 0, 1)])
    metrics.add(cols)
    log.add(np.array([1]), np.array([12]), np.array([3]), np.array([4.0]), np.array([24]), 4, 0.125, 0.3, 7.0)
    metrics.add(log.take())  # two waiting batches: their chunk indices are joined with offsets
    rows = metrics[(0, 0, 1)].rows
    assert [(r["opt_step"], r["loss"], r["wall_time"], r["fps"]) for r in rows] == [
        (2, 0.5, 0.1, 9.0), (3, 0.25, 0.2, 8.0), (4, 0.125, 0.3, 7.0)]
    assert [(r["frame"], r["t"], r["env_frame"]) for r in rows] == [(5, 5, 10), (9, 4, 18), (12, 3, 24)]
    assert [r["opt_step"] for r in metrics[(0, 0, 0)].rows] == [2]


def test_session_metrics_split_episodes_by_body_only_when_a_body_is_read() -> None:
    """Episodes of thousands of bodies wait as the session's columns; a body's rows are made when it is read, and are
    the rows that body would have got episode by episode."""
    coords = [(0, 0, b) for b in range(5000)]
    metrics = SessionMetrics(coords)
    rng = np.random.default_rng(0)
    expected: dict[int, list[float]] = {}
    for chunk in range(3):
        bodies = rng.integers(0, len(coords), 400)
        cols = columns(rng.normal(size=400).tolist(), 400 * chunk)
        metrics.add({"body": bodies, **{k: np.asarray(v) for k, v in cols.items()}})
        for b, r in zip(bodies.tolist(), cols["return"].tolist()):
            expected.setdefault(b, []).append(r)
    assert len(metrics) == 5000 and (0, 0, 4999) in metrics and (0, 0, 5000) not in metrics
    assert metrics._bodies == {}  # nothing split or made yet
    body = next(iter(expected))
    assert [r["return"] for r in metrics[(0, 0, body)].rows] == expected[body]
    assert len(metrics._bodies) == len(expected)  # one read splits every waiting episode, once
    assert [len(metrics[c]) for c in coords] == [len(expected.get(b, [])) for b in range(5000)]
    assert len(metrics._bodies) == 5000  # bodies without episodes are made when read


def test_session_metrics_settle_hands_each_body_one_batch_and_names_it() -> None:
    metrics = SessionMetrics([(0, 0, 0), (0, 0, 1), (0, 0, 2)])
    assert metrics.settle() == []
    for start in (0, 3):
        cols = columns([1.0, 2.0, 3.0], start)
        metrics.add({"body": np.array([2, 0, 2]), **{k: np.asarray(v) for k, v in cols.items()}})
    touched = metrics.settle()
    assert [c for c, _ in touched] == [(0, 0, 0), (0, 0, 2)]
    assert [r["return"] for r in touched[1][1].rows] == [1.0, 3.0, 1.0, 3.0]
    assert touched[0][1].last_columns()["return"].tolist() == [2.0, 2.0]
