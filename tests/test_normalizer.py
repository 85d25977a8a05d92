"""Running statistics: whatever the batches' sizes, they are those of every row fed, and a one-row batch (a single
body's step, which skips numpy's batch mean and variance) folds in exactly as the general formula does."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from slm_lab_like.agents.normalizer import ObsNormalizer, RunningMeanStd


def general_update(rms: RunningMeanStd, x: np.ndarray) -> None:
    """Chan et al.'s update as written for any batch (the one-row case not taken apart)."""
    b_mean, b_var, b_count = x.mean(axis=0), x.var(axis=0), x.shape[0]
    delta = b_mean - rms.mean
    total = rms.count + b_count
    rms.mean = rms.mean + delta * b_count / total
    rms.var = (rms.var * rms.count + b_var * b_count + delta**2 * rms.count * b_count / total) / total
    rms.count = total


rows = st.lists(st.integers(1, 5), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(rows, st.integers(0, 2**31))
def test_statistics_are_those_of_every_row_fed_and_one_row_batches_match_the_general_formula(
        sizes: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    batches = [(rng.normal(3.0, 2.0, (n, 4)) * rng.choice([1.0, 100.0])).astype(np.float32) for n in sizes]
    ours, theirs = RunningMeanStd((4,), epsilon=0.0), RunningMeanStd((4,), epsilon=0.0)
    ours.count = theirs.count = 0.0
    for x in batches:
        ours.update(x)
        general_update(theirs, x)
        np.testing.assert_array_equal(ours.mean, theirs.mean)
        np.testing.assert_array_equal(ours.var, theirs.var)
    every = np.concatenate(batches).astype(np.float64)
    np.testing.assert_allclose(ours.mean, every.mean(axis=0), rtol=1e-5)  # batch means in float32
    np.testing.assert_allclose(ours.var, every.var(axis=0), rtol=1e-4)


def test_observations_are_standardised_and_clipped_with_the_statistics_of_the_rows_that_act() -> None:
    norm = ObsNormalizer((2,), clip=5.0)
    seen = []
    for i in range(50):
        x = np.array([[i, -3.0 * i], [1000.0, 1000.0]], np.float32)
        out = norm(x, update=True, rows=np.array([True, False]))
        seen.append(x[0])
    expected = (x - norm.rms.mean) / np.sqrt(norm.rms.var + 1e-8)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[0], expected[0].astype(np.float32), rtol=1e-6)
    np.testing.assert_array_equal(out[1], [5.0, 5.0])  # the row that did not act is clipped, not counted
    np.testing.assert_allclose(norm.rms.mean, np.mean(seen, axis=0), rtol=1e-3)
    restored = ObsNormalizer((2,), clip=5.0)
    restored.load_state_dict(norm.state_dict())
    np.testing.assert_array_equal(restored(x, update=False), norm(x, update=False))
