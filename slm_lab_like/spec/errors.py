"""The one error type of spec handling: a one-line message naming the file and JSON path."""
from __future__ import annotations


class SpecError(ValueError):
    """A spec problem, e.g. `spec/x.json: agent[0].net.hid_layers: expected a list of integers, got "64"`."""

    def __init__(self, path: str, message: str, source: str = "") -> None:
        self.path = path
        self.message = message
        self.source = source
        where = ": ".join(p for p in (source, path) if p)
        super().__init__(f"{where}: {message}" if where else message)

    def in_file(self, source: str) -> "SpecError":
        """The same error, attributed to a file."""
        return SpecError(self.path, self.message, source)


def join(path: str, key: "str | int") -> str:
    """Extend a JSON path: join("agent", 0) -> "agent[0]", join("agent[0]", "net") -> "agent[0].net"."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key
