"""What an SLM Lab spec became here: the lab's raw spec, and one line per SLM Lab key saying how it was taken."""
from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, field
from typing import Any

import pydash

from slm_lab_like.spec.errors import SpecError, join

_MISSING = object()


@dataclass
class Line:
    """One SLM Lab key: its path in the file, its value, the key of this lab it set (None: it sets nothing here,
    for the reason in `note`) and what was done to it."""

    source: str
    value: Any
    target: str | None
    note: str = ""

    def __str__(self) -> str:
        value = json.dumps(self.value, default=str)
        where = f"-> {self.target}" if self.target else "-> (nothing)"
        return f"{self.source} = {value}  {where}{f'  ({self.note})' if self.note else ''}"


@dataclass
class Translation:
    """The raw spec of this lab built from one SLM Lab spec, and the lines that say how each key was taken."""

    name: str
    spec: dict[str, Any] = field(default_factory=lambda: {"agent": [{}], "env": [{}], "body": {}, "meta": {}})
    lines: list[Line] = field(default_factory=list)
    last: str = ""  # the SLM Lab key read last: where a value of a type no rule expects is told

    def set(self, target: str, value: Any) -> None:
        """Set a key of this lab's spec (a dotted path such as agent[0].algorithm.gamma)."""
        pydash.set_(self.spec, target, value)

    def source_of(self, target: str, message: str = "") -> str | None:
        """The SLM Lab key that set `target` or the nearest block above it; for an error at a block (this lab's
        `env[0].kwargs`), the key under it that the message names, or its only one."""
        best: tuple[int, str] | None = None
        for line in self.lines:
            if line.target and (target == line.target or target.startswith(line.target + ".")
                                or target.startswith(line.target + "[")):
                if best is None or len(line.target) > best[0]:
                    best = (len(line.target), line.source)
        if best:
            return best[1]
        under = [(line.source, line.target.rsplit(".", 1)[1]) for line in self.lines
                 if line.target and line.target.startswith(target + ".")]
        named = [source for source, key in under if f'"{key}"' in message or f"'{key}'" in message]
        if len(named) == 1:
            return named[0]
        return under[0][0] if len(under) == 1 else None

    def located(self, error: SpecError) -> SpecError:
        """A validation error of the translated spec, told at the SLM Lab key it came from."""
        source = self.source_of(error.path, error.message)
        if source is None:
            return SpecError(error.path, error.message, error.source)
        return SpecError(source, f"{error.message} (as {error.path} here)", error.source)


class Block:
    """One SLM Lab object under translation. Every key is taken once: mapped, noted as without effect, or refused;
    `done` refuses what was not taken, so no key is dropped in silence."""

    def __init__(self, data: Any, path: str, out: Translation) -> None:
        if not isinstance(data, dict):
            raise SpecError(path, f"expected an object, got {json.dumps(data, default=str)[:60]}")
        self.data, self.path, self.out = data, path, out
        self.taken: set[str] = set()
        self.asked: set[str] = set()  # every key a rule looked for, present or not: what a typo is matched against

    def has(self, key: str) -> bool:
        self.asked.add(key)
        return key in self.data

    def peek(self, key: str, default: Any = None) -> Any:
        """A key's value without taking it."""
        self.asked.add(key)
        self.out.last = self.at(key)
        return self.data.get(key, default)

    def take(self, key: str, default: Any = _MISSING) -> Any:
        """A key's value, now taken; a SpecError naming the key when it is missing and has no default."""
        self.asked.add(key)
        self.out.last = self.at(key)
        if key not in self.data:
            if default is _MISSING:
                raise SpecError(self.path, f'missing key "{key}"')
            return default
        self.taken.add(key)
        return self.data[key]

    def num(self, key: str, default: Any, integer: bool = False) -> Any:
        """A key's value as a number (not taken), its default when absent; SpecError at the key otherwise."""
        return number(self.data[key], self.at(key), integer) if key in self.data else default

    def at(self, key: str) -> str:
        """The SLM Lab path of a key of this block."""
        return join(self.path, key)

    def map(self, key: str, target: str, value: Any = _MISSING, note: str = "") -> None:
        """Take `key` and set `target` to its value (or to `value`, converted), with a line saying so."""
        self.asked.add(key)
        if key not in self.data:
            return
        raw = self.take(key)
        new = raw if value is _MISSING else value
        self.out.set(target, new)
        self.out.lines.append(Line(self.at(key), raw, target, note or ("" if new == raw else f"as {_text(new)}")))

    def line(self, key: str, value: Any, target: str | None, note: str = "") -> None:
        """Say how a key already taken (or defaulted) was translated."""
        self.out.lines.append(Line(self.at(key), value, target, note))

    def note(self, key: str, why: str) -> None:
        """Take `key` as having no effect to reproduce here, with the reason on its line."""
        self.asked.add(key)
        if key in self.data and key not in self.taken:
            self.out.lines.append(Line(self.at(key), self.take(key), None, why))

    def expect(self, key: str, allowed: tuple[Any, ...], why: str, refusal: str) -> None:
        """Take `key` when its value is one of `allowed` (noted with `why`), refuse it with `refusal` otherwise."""
        self.asked.add(key)
        if key not in self.data or key in self.taken:
            return
        if self.data[key] not in allowed:
            raise SpecError(self.at(key), f"{_text(self.data[key])}: {refusal}")
        self.note(key, why)

    def refuse(self, key: str, why: str) -> SpecError:
        return SpecError(self.at(key), why)

    def done(self) -> None:
        """Refuse the first key no rule took: a likely typo of a key the rules know, or a key without a counterpart."""
        for key in self.data:
            if key not in self.taken:
                close = difflib.get_close_matches(str(key), sorted(self.asked - set(self.data)), n=1)
                if close:
                    raise SpecError(self.at(key), f'unknown SLM Lab key; did you mean "{close[0]}"?')
                raise SpecError(self.at(key), "this SLM Lab key has no counterpart in this lab")

    def sub(self, key: str) -> "Block":
        """The object under `key` as a block of its own (taken here)."""
        return Block(self.take(key), self.at(key), self.out)


def number(value: Any, where: str, integer: bool = False) -> Any:
    """A number of an SLM Lab key (an int where `integer`: 2e5 and 200000.0 are 200000); SpecError at `where` for
    anything else, such as a ${placeholder} that SLM Lab fills from its command line."""
    placeholder = isinstance(value, str) and "${" in value
    if isinstance(value, str) and not placeholder:
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        why = "a placeholder SLM Lab fills from its command line (-s); write the value" if placeholder else \
            "expected a number"
        raise SpecError(where, f"{_text(value)}: {why}")
    if integer:
        if not math.isfinite(value) or value != int(value):
            raise SpecError(where, f"{_text(value)}: expected a whole number")
        return int(value)
    return float(value)


def _text(value: Any) -> str:
    return json.dumps(value, default=str)
