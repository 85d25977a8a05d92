"""Command-line overrides of a spec's keys (`--set agent[0].algorithm.gamma=0.98`, `--seed 3`), applied to the raw
spec before it is validated, so an override is checked as the key it sets would be in the file."""
from __future__ import annotations

import json
from typing import Any, Sequence

import pydash

from slm_lab_like.spec.errors import SpecError, join


def parse(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` -> (KEY, VALUE): the key a dotted path (`agent[0].net.hid_layers` or `agent.0.net.hid_layers`),
    the value JSON where it parses as JSON (`0.98`, `[64, 64]`, `true`, `null`), else the text itself (`PPO`)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise SpecError("--set", f"expected KEY=VALUE (a spec key path such as agent[0].algorithm.gamma=0.98), got "
                                 f"{text!r}")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def apply(raw: dict, overrides: Sequence[str]) -> dict:
    """A copy of `raw` with each override set; SpecError at `--set` for a key whose place cannot be in the spec (a list
    item it does not have, a key under a value that is no object). A key an object lacks is added (an object on the
    way too: `meta.random_seed` in a spec without `meta`), and validation then says whether the spec knows it."""
    out = pydash.clone_deep(raw)
    for text in overrides:
        key, value = parse(text)
        parts = pydash.to_path(key)
        node: Any = out
        where = ""
        for part in parts[:-1]:
            node, where = _step(node, part, where, text)
        last = parts[-1]
        if isinstance(node, list):
            index = _index(node, last, where, text)
            node[index] = value
        elif isinstance(node, dict):
            node[str(last)] = value
        else:
            raise SpecError("--set", f"{text}: {where or 'the spec'} is {json.dumps(node)}, not an object or a list")
    return out


def _step(node: Any, part: Any, where: str, text: str) -> tuple[Any, str]:
    """The child `part` of `node` and its path; SpecError when the spec has no such place."""
    if isinstance(node, list):
        index = _index(node, part, where, text)
        return node[index], join(where, index)
    if isinstance(node, dict):
        key = str(part)
        return node.setdefault(key, {}), join(where, key)
    raise SpecError("--set", f"{text}: {where or 'the spec'} is {json.dumps(node)}, not an object or a list")


def _index(node: list, part: Any, where: str, text: str) -> int:
    """`part` as an index of the list `node` at `where`; SpecError when it is none."""
    try:
        index = int(part)
    except (TypeError, ValueError):
        raise SpecError("--set", f"{text}: {where} is a list; expected an index, got {part!r}") from None
    if not 0 <= index < len(node):
        raise SpecError("--set", f"{text}: {where} has {len(node)} item(s); no {where}[{index}]")
    return index


def with_seed(overrides: Sequence[str], seed: int | None) -> list[str]:
    """The overrides with `--seed` as one more (`meta.random_seed`), set last."""
    return [*overrides, *([] if seed is None else [f"meta.random_seed={seed}"])]
