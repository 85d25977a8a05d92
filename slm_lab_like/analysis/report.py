"""An experiment's report: trials ranked by fitness as a table (CSV and markdown), and one plot per search
variable of its value against fitness."""
from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

from slm_lab_like.analysis.atomic import write_text
from slm_lab_like.analysis.plots import variable_plot

METRICS = ("fitness", "strength", "consistency", "mean_return_100", "stability", "frames_to_threshold",
           "seconds_to_threshold", "reached")


def rank(records: list[dict]) -> list[dict]:
    """Trials by fitness, best first; trials without a fitness (stopped early, failed) last, by index."""
    return sorted(records, key=lambda r: (r.get("fitness") is None, -(r.get("fitness") or 0.0), r["trial"]))


def table_rows(records: list[dict], variables: list[str]) -> list[dict]:
    """One flat row per trial, ranked: rank, trial, status, each variable's value, then the metrics."""
    rows = []
    for k, r in enumerate(rank(records), 1):
        row = {"rank": k, "trial": r["trial"], "status": r["status"]}
        row.update({v: _cell(r["values"].get(v)) for v in variables})
        row.update({m: _cell(r.get(m)) for m in METRICS})
        rows.append(row)
    return rows


def to_csv(rows: list[dict]) -> str:
    """The rows as CSV text."""
    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return buf.getvalue()


def to_markdown(rows: list[dict]) -> str:
    """The rows as a markdown table (also what is printed)."""
    if not rows:
        return ""
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(str(row[h]) for h in head) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_table(out_dir: Path, records: list[dict], variables: list[str]) -> str:
    """experiment_table.csv and experiment_table.md under out_dir; returns the markdown."""
    rows = table_rows(records, variables)
    markdown = to_markdown(rows)
    write_text(Path(out_dir) / "experiment_table.csv", to_csv(rows))
    write_text(Path(out_dir) / "experiment_table.md", markdown)
    return markdown


def plot_variables(out_dir: Path, records: list[dict], variables: list[tuple[str, str]]) -> list[Path]:
    """One PNG per search variable (path, kind): its value in each trial against the trial's fitness."""
    scored = [r for r in records if r.get("fitness") is not None]
    paths = [Path(out_dir) / f"search_{_slug(var)}.png" for var, _ in variables]
    for (var, kind), path in zip(variables, paths):
        variable_plot([r["values"][var] for r in scored], [r["fitness"] for r in scored], var, kind, path)
    return paths


def _slug(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", path).strip("_")


def _cell(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 4)
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return "" if v is None else v
