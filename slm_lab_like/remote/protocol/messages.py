"""The protocol's version, its request types, and the limits every message is held to (docs/PROTOCOL.md §1, §11)."""
from __future__ import annotations


PROTOCOL_VERSION = 1
MAX_SEED = 2**63 - 1  # a reset seed is a non-negative int64
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
MAX_FRAMES = 64
MAX_SPACE_DEPTH = 8
MAX_SPACE_ELEMENTS = 10_000_000

REQUEST_TYPES = frozenset({"hello", "reset", "step", "close", "ping", "render", "vreset", "vstep"})
