"""What a finished session leaves behind, as the analysis reads it: seed, clocks, each body's episode rows."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from slm_lab_like.analysis.metrics import WINDOW, BodyMetrics, pair_returns
from slm_lab_like.spec.coords import Coord


@dataclass
class SessionResult:
    """What a session leaves behind: its seed, each env's clock, each body's episode rows."""

    spec_name: str
    index: int
    seed: int
    env_frames: list[int]
    env_episodes: list[int]
    metrics: Mapping[Coord, BodyMetrics]
    wall_time: float
    agent_names: list[str] = field(default_factory=list)
    env_names: list[str] = field(default_factory=list)
    out_dir: Path | None = None
    train: list[list[tuple[int, dict[str, float]]]] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)  # the Ray node of each try, for a session run on Ray
    env_dropped: list[int] = field(default_factory=list)  # episodes each env dropped, cut by a lost judge

    @property
    def fps(self) -> float:
        return sum(self.env_frames) / self.wall_time if self.wall_time > 0 else math.nan

    def pair_mean_return(self, a: int, e: int) -> float:
        """The last 100-episode mean return of agent a's bodies in env e, episodes merged in frame order."""
        merged = pair_returns(self.metrics, a, e)
        return merged[-1][2] if merged else math.nan

    def first_reach(self, a: int, e: int, target: float) -> tuple[int, float] | None:
        """(env frame, wall seconds) when agent a's 100-episode mean return in env e first reached `target`."""
        series = pair_returns(self.metrics, a, e)
        for frame, _, ma, wall in series[WINDOW - 1:]:
            if ma >= target:
                return frame, wall
        return None

    def summary(self) -> dict:
        """JSON-ready summary of the session."""
        pairs = sorted({(c[0], c[1]) for c in self.metrics})
        placement = {"nodes": self.nodes} if self.nodes else {}
        return {
            "spec": self.spec_name, "session": self.index, "seed": self.seed, **placement,
            "wall_time": round(self.wall_time, 3), "fps": round(self.fps, 1),
            "envs": [{"name": n, "frames": f, "episodes": k, **({"dropped": d} if d else {})}
                     for n, f, k, d in zip(self.env_names, self.env_frames, self.env_episodes,
                                           self.env_dropped or [0] * len(self.env_names))],
            "pairs": [{"agent": self.agent_names[a], "env": self.env_names[e], "coord": [a, e],
                       "mean_return_100": self.pair_mean_return(a, e)} for a, e in pairs],
            "bodies": [{"coord": list(c), "episodes": len(m), "mean_return_100": m.mean_return}
                       for c, m in sorted(self.metrics.items())],
        }
