"""Write a tournament's leaderboard (JSON, CSV, markdown) and its win-rate matrix (PNG), each file atomically."""
from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from slm_lab_like.analysis.atomic import write_json, write_text, write_with  # noqa: E402
from slm_lab_like.analysis.ratings import Z, head_to_head, leaderboard  # noqa: E402

COLUMNS = ("rank", "player", "mu", "sigma", "low", "high", "ordinal", "games", "wins", "draws", "losses", "forfeits",
           "score", "nash_weight", "nash_score", "s_per_move")


def markdown(rows: list[dict[str, Any]]) -> str:
    """The leaderboard as a markdown table (rating as mu [low, high]; Nash mixture weight and score against it)."""
    lines = ["| rank | player | rating (mu) | interval | games | W / D / L | forfeits | score | Nash weight | "
             "vs Nash | s / move |",
             "|---:|---|---:|---|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        per_move = "" if r["s_per_move"] is None else f"{r['s_per_move']:.4f}"
        lines.append(f"| {r['rank']} | {r['player']} | {r['mu']:.1f} | [{r['low']:.1f}, {r['high']:.1f}] | "
                     f"{r['games']} | {r['wins']} / {r['draws']} / {r['losses']} | {r['forfeits']} | "
                     f"{r['score']:.3f} | {r['nash_weight']:.3f} | {r['nash_score']:.3f} | {per_move} |")
    return "\n".join(lines) + "\n"


def matrix_markdown(score: np.ndarray, names: list[str]) -> str:
    """The score-rate matrix as a markdown table (row player's score against the column player)."""
    lines = ["| row vs column | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for i, name in enumerate(names):
        cells = ["" if i == j or math.isnan(score[i, j]) else f"{score[i, j]:.2f}" for j in range(len(names))]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_matrix(path: Path, score: np.ndarray, meetings: np.ndarray, names: list[str], title: str) -> None:
    """A heatmap of score rates (row against column), each cell labelled with its rate and game count."""
    n = len(names)
    fig, ax = plt.subplots(figsize=(1.2 * n + 3, 1.0 * n + 2))
    image = ax.imshow(np.ma.masked_invalid(score), cmap="RdYlGn", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(n), names, rotation=35, ha="right")
    ax.set_yticks(range(n), names)
    for i in range(n):
        for j in range(n):
            if i != j and meetings[i, j]:
                ax.text(j, i, f"{score[i, j]:.2f}\n({meetings[i, j]})", ha="center", va="center", fontsize=8)
    ax.set_title(title)
    fig.colorbar(image, ax=ax, label="score rate of the row player (win 1, draw 0.5)")
    fig.tight_layout()
    write_with(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100))
    plt.close(fig)


def write_leaderboard(out_dir: Path, games: list[dict[str, Any]], names: list[str], title: str,
                      meta: dict[str, Any]) -> list[dict[str, Any]]:
    """leaderboard.json (rows, the matrix, `meta`), leaderboard.csv, leaderboard.md and winrate_matrix.png in
    `out_dir`; returns the rows."""
    rows = leaderboard(games, names)
    score, meetings = head_to_head(games, names)
    order = [r["player"] for r in rows]
    idx = [names.index(p) for p in order]
    score, meetings = score[np.ix_(idx, idx)], meetings[np.ix_(idx, idx)]
    matrix = [[None if math.isnan(v) else round(float(v), 4) for v in row] for row in score]
    write_json(out_dir / "leaderboard.json", {**meta, "interval": f"mu +- {Z} sigma (openskill Plackett-Luce)",
                                               "nash": "max-entropy Nash mixture of the score matrix's meta-game; "
                                                       "nash_score: expected score against it",
                                               "leaderboard": rows, "players": order, "score_matrix": matrix,
                                               "meetings": meetings.tolist()})
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: r[k] for k in COLUMNS} for r in rows)
    write_text(out_dir / "leaderboard.csv", buf.getvalue())
    write_text(out_dir / "leaderboard.md", f"# {title}\n\n" + markdown(rows) + "\nScore rate, row player against "
               "column player:\n\n" + matrix_markdown(score, order))
    plot_matrix(out_dir / "winrate_matrix.png", score, meetings, order, title)
    return rows
