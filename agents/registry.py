"""Name -> class registries for algorithms, memories and networks, so a spec can name its parts."""
from __future__ import annotations

import difflib
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """A named collection of classes; lookups of unknown names suggest the closest known one."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Class decorator that files the class under `name`."""

        def deco(cls: T) -> T:
            if name in self._items and self._items[name] is not cls:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = cls
            return cls

        return deco

    def get(self, name: str) -> T:
        """The class registered as `name`; KeyError with a one-line hint otherwise."""
        try:
            return self._items[name]
        except KeyError:
            raise KeyError(unknown_name_message(self.kind, name, self._items)) from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items


def unknown_name_message(kind: str, name: object, known: "dict | list") -> str:
    """One-line message for an unknown name, with a did-you-mean hint when one is close."""
    options = sorted(known)
    close = difflib.get_close_matches(str(name), options, n=1)
    hint = f'; did you mean "{close[0]}"?' if close else f"; known: {', '.join(options)}"
    return f'unknown {kind} "{name}"{hint}'


ALGORITHMS: Registry = Registry("algorithm")
MEMORIES: Registry = Registry("memory")
NETS: Registry = Registry("net")
