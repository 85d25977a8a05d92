"""Session and trial plots of returns against frames, and search variables against fitness (matplotlib, headless)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from slm_lab_like.analysis.atomic import write_with  # noqa: E402
from slm_lab_like.analysis.metrics import pair_returns  # noqa: E402

if TYPE_CHECKING:
    from slm_lab_like.analysis.results import SessionResult

TRAIN_PANELS = ("train/loss", "train/entropy")


def _pairs(result: "SessionResult") -> list[tuple[int, int]]:
    return sorted({(c[0], c[1]) for c in result.metrics})


def _axes(n_envs: int, title: str) -> tuple[plt.Figure, Sequence[plt.Axes]]:
    fig, axes = plt.subplots(1, n_envs, figsize=(5.5 * n_envs, 4), squeeze=False)
    fig.suptitle(title)
    return fig, axes[0]


def _save(fig: plt.Figure, path: Path) -> None:
    """Fixed margins in inches (room for tick labels, axis labels, titles and the suptitle), not tight_layout, which
    measured every text of the figure again and was a third of a session's plot (0.2 of 0.6 s of CPU)."""
    w, h = fig.get_size_inches()
    top = 0.85 if fig.get_suptitle() else 0.5
    fig.subplots_adjust(left=1.05 / w, right=1 - 0.25 / w, bottom=0.6 / h, top=1 - top / h, wspace=0.3, hspace=0.45)
    write_with(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100))
    plt.close(fig)


def session_plot(result: "SessionResult", path: Path) -> None:
    """Episode returns (dots) and their 100-episode mean (line) per agent, one panel per env; below them, each
    agent's loss and entropy from its stats when it reported any."""
    panels = [k for k in TRAIN_PANELS if any(k in row for rows in result.train for _, row in rows)]
    cols = max(len(result.env_names), len(panels))
    fig, grid = plt.subplots(1 + bool(panels), cols, figsize=(5.5 * cols, 4 * (1 + bool(panels))), squeeze=False)
    fig.suptitle(f"{result.spec_name} session {result.index} (seed {result.seed})")
    axes = grid[0]
    for a, e in _pairs(result):
        series = pair_returns(result.metrics, a, e)
        if not series:
            continue
        x, ret, ma, _ = np.array(series).T
        line, = axes[e].plot(x, ma, label=result.agent_names[a])
        axes[e].scatter(x, ret, s=3, alpha=0.25, color=line.get_color())
    for e, ax in enumerate(axes[:len(result.env_names)]):
        ax.set(title=result.env_names[e], xlabel="env frame", ylabel="return")
        if ax.lines:
            ax.legend(loc="lower right")
    for ax in list(axes[len(result.env_names):]) + list(grid[1][len(panels):] if panels else []):
        ax.axis("off")
    for key, ax in zip(panels, grid[1] if panels else []):
        for a, rows in enumerate(result.train):
            points = [(f, row[key]) for f, row in rows if key in row]
            if points:
                ax.plot(*np.array(points).T, label=result.agent_names[a])
        ax.set(title=key, xlabel="agent frame")
        ax.legend(loc="upper right")
    _save(fig, path)


def trial_plot(results: Sequence["SessionResult"], path: Path) -> None:
    """Mean over sessions of each agent's 100-episode mean return, with a min-max band, one panel per env.

    The mean and band run over the frames every session reached, so they never jump where one session ends;
    a session that ran further goes on as a thin line of its own, ending in a cross."""
    first = results[0]
    fig, axes = _axes(len(first.env_names), f"{first.spec_name} trial ({len(results)} sessions)")
    for a, e in _pairs(first):
        curves = []
        for r in results:
            series = pair_returns(r.metrics, a, e)
            if series:
                curves.append(np.array(series)[:, [0, 2]])
        if not curves:
            continue
        common = min(c[-1, 0] for c in curves)
        grid = np.linspace(max(c[0, 0] for c in curves), common, 200) if common > 0 else np.zeros(1)
        ys = np.array([np.interp(grid, c[:, 0], c[:, 1]) for c in curves])
        line, = axes[e].plot(grid, ys.mean(axis=0), label=first.agent_names[a])
        axes[e].fill_between(grid, ys.min(axis=0), ys.max(axis=0), alpha=0.2, color=line.get_color())
        for c in curves:
            beyond = c[c[:, 0] >= common]
            if len(beyond) > 1:
                axes[e].plot(beyond[:, 0], beyond[:, 1], lw=0.8, alpha=0.5, color=line.get_color())
                axes[e].plot(beyond[-1, 0], beyond[-1, 1], "x", color=line.get_color())
    for e, ax in enumerate(axes):
        ax.set(title=first.env_names[e], xlabel="env frame", ylabel="mean return (100 episodes)")
        if ax.lines:
            ax.legend(loc="lower right")
    _save(fig, path)


def variable_plot(xs: Sequence, fitness: Sequence[float], name: str, kind: str, path: Path) -> None:
    """A search variable's value in each trial against the trial's fitness (categories for non-numbers)."""
    fig, ax = plt.subplots(figsize=(5.5, 4))
    if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs):
        ax.scatter(xs, fitness)
        if kind == "loguniform":
            ax.set_xscale("log")
    else:
        labels = sorted({json.dumps(x) for x in xs})
        ax.scatter([labels.index(json.dumps(x)) for x in xs], fitness)
        ax.set_xticks(range(len(labels)), labels)
    ax.set(title=f"{name} ({kind})", xlabel=name, ylabel="fitness")
    _save(fig, path)
