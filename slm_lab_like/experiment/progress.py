"""The progress display of a search: one log line per change of trials done and running, or of the best trial."""
from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("slm_lab_like")


def show_values(values: dict[str, Any]) -> str:
    """Search values as `key=value` with each key's last path component (agent[0].algorithm.gamma -> gamma)."""
    return ", ".join(f"{path.rpartition('.')[2]}={value}" for path, value in values.items())


class SearchProgress:
    """Tracks trials started, done and the best fitness so far; logs a line whenever one of them changes."""

    def __init__(self, name: str, total: int) -> None:
        self.name = name
        self.total = total
        self.running: set[int] = set()
        self.done: set[int] = set()
        self.best: dict | None = None
        self._last = ""

    def started(self, trials: set[int]) -> None:
        """Mark these trials as running (trials already done are ignored)."""
        self.running |= trials - self.done
        self._emit()

    def finished(self, record: dict) -> None:
        """A trial ended: record its result and keep the best by fitness."""
        self.running.discard(record["trial"])
        self.done.add(record["trial"])
        fitness = record.get("fitness")
        if fitness is not None and (self.best is None or fitness > self.best["fitness"]):
            self.best = record
        self._emit()

    def line(self) -> str:
        """The current display line."""
        head = f"search {self.name} | trials {len(self.done)}/{self.total} done, {len(self.running)} running"
        if self.best is None:
            return head
        return (f"{head} | best fitness {self.best['fitness']:.3f} "
                f"(trial {self.best['trial']}: {show_values(self.best['values']) or 'no variables'})")

    def _emit(self) -> None:
        line = self.line()
        if line != self._last:
            self._last = line
            log.info("%s", line)
