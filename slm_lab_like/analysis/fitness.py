"""Fitness of sessions and trials: strength over a random baseline, efficiency, stability, consistency.

Per agent-env pair of a session (returns merged over the pair's bodies in env-frame order):
- `mean_return_100`: the final 100-episode mean return.
- `strength`: (mean_return_100 - random) / scale, where `random` is the mean return of random actions in
  the same env and `scale` is (threshold - random) when the threshold lies above random (so 0 = random,
  1 = the threshold), else max(|random|, 1).
- `frames_to_threshold` / `seconds_to_threshold`: env frame and wall seconds at which the 100-episode
  mean return first reached the threshold (None when it never did, or when there is no threshold).
- `stability`: the share of its best gain over random that the run still holds at the end,
  clip((final - random) / (peak - random), 0, 1) on the moving mean (peak taken once the 100-episode
  window is full, or over the whole run when it never fills); None when the run never beats random.
A session's values are the means over its pairs; its efficiencies are the slowest pair's (None unless
every pair reached its threshold).

Per trial: the mean over sessions of each value, `consistency` = clip(1 - std / |mean|, 0, 1) of the
session strengths (1 for one session), `reached` = the fraction of sessions that reached the threshold,
and `fitness` = mean strength - std of strength over sessions: strong trials rank first, and a trial that
is strong in only some of its seeds ranks below one that is as strong in all of them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from slm_lab_like.analysis.metrics import WINDOW, pair_returns

if TYPE_CHECKING:
    from slm_lab_like.analysis.results import SessionResult


@dataclass(frozen=True)
class Reference:
    """What one agent-env pair is judged against: the random agent's mean return and the threshold to reach."""

    random_return: float
    threshold: float | None = None

    @property
    def scale(self) -> float:
        """The strength normaliser: threshold - random when the threshold is above random, else max(|random|, 1)."""
        if self.threshold is not None and self.threshold > self.random_return:
            return self.threshold - self.random_return
        return max(abs(self.random_return), 1.0)

    def strength(self, ret: float) -> float:
        """(ret - random) / scale: 0 at the random agent's return, 1 at the threshold."""
        return (ret - self.random_return) / self.scale


def stability(moving_mean: list[float], random_return: float) -> float | None:
    """clip((final - random) / (peak - random), 0, 1) of a moving-mean series; None when it never beats random."""
    if not moving_mean:
        return None
    settled = moving_mean[WINDOW - 1:] or moving_mean
    peak = max(settled)
    if peak <= random_return:
        return None
    return float(np.clip((settled[-1] - random_return) / (peak - random_return), 0.0, 1.0))


def pair_metrics(result: "SessionResult", a: int, e: int, ref: Reference) -> dict:
    """The metrics of agent a in env e of one session (see the module docstring)."""
    series = pair_returns(result.metrics, a, e)
    ret = result.pair_mean_return(a, e)
    reach = result.first_reach(a, e, ref.threshold) if ref.threshold is not None else None
    return {
        "coord": [a, e], "mean_return_100": _num(ret), "strength": _num(ref.strength(ret)),
        "frames_to_threshold": reach[0] if reach else None,
        "seconds_to_threshold": round(reach[1], 4) if reach else None,
        "stability": stability([s[2] for s in series], ref.random_return),
    }


def session_metrics(result: "SessionResult", refs: dict[tuple[int, int], Reference]) -> dict:
    """A session's metrics: per pair, and their means (efficiency: the slowest pair, when all reached)."""
    pairs = [pair_metrics(result, a, e, refs[(a, e)]) for a, e in sorted({c[:2] for c in result.metrics})]
    out: dict[str, Any] = {"session": result.index, "seed": result.seed, "frames": int(sum(result.env_frames)),
           "wall_time": round(result.wall_time, 3)}
    for key in ("mean_return_100", "strength", "stability"):
        out[key] = _mean(p[key] for p in pairs)
    for key in ("frames_to_threshold", "seconds_to_threshold"):
        values = [p[key] for p in pairs]
        out[key] = max(values) if values and None not in values else None
    out["pairs"] = pairs
    return out


def trial_metrics(sessions: list[dict]) -> dict:
    """A trial's metrics from its sessions' metrics: means, consistency, fraction reached and fitness."""
    strengths = [s["strength"] for s in sessions if _finite(s["strength"])]
    std = float(np.std(strengths)) if strengths else None
    out: dict[str, Any] = {key: _mean(s[key] for s in sessions)
                           for key in ("mean_return_100", "strength", "stability", "frames_to_threshold", "seconds_to_threshold")}
    out["strength_std"] = std
    out["consistency"] = consistency(strengths)
    out["reached"] = sum(s["frames_to_threshold"] is not None for s in sessions) / len(sessions) if sessions else 0.0
    out["fitness"] = out["strength"] - std if strengths else None
    return out


def consistency(values: list[float]) -> float | None:
    """clip(1 - std / |mean|, 0, 1): 1 when every session is alike; 0 when they spread as wide as their mean."""
    if not values:
        return None
    mean, std = float(np.mean(values)), float(np.std(values))
    if mean == 0:
        return 1.0 if std == 0 else 0.0
    return float(np.clip(1 - std / abs(mean), 0.0, 1.0))


def _finite(v: object) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def _num(v: float) -> float | None:
    """A finite number, or None for NaN (JSON has no NaN)."""
    return v if _finite(v) else None


def _mean(values: Iterable[Any]) -> float | None:
    """Mean of the finite values; None when there are none (JSON-friendly)."""
    finite = [v for v in values if _finite(v)]
    return float(np.mean(finite)) if finite else None
