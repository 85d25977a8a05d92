"""The protocol's version, its limits, and its requests' fields declared once (docs/PROTOCOL.md §1, §5, §11).

Each msgpack request's fields are a :class:`Field` tuple in :data:`REQUESTS`: the judge checks a request against it
before reading it (:func:`check_request`), the client side of the compliance kit checks a client's requests against
it, the fuzz tests draw request types from it, and a test holds docs/PROTOCOL.md's field tables to it. A field with a ``code`` is held to its types there (missing, when
required, or of another type: that error code); a field without one is read by the judge as §5 says (``retry``
is a retransmit only when it is ``true``; a vector hello's ``n`` is the single judge's to judge; ...).
"""
import difflib
from typing import Any, NamedTuple

from slm_lab_like.remote.protocol.errors import ProtocolError

PROTOCOL_VERSION = 1
MAX_SEED = 2**63 - 1  # a reset seed is a non-negative int64
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
MAX_FRAMES = 64
MAX_SPACE_DEPTH = 8
MAX_SPACE_ELEMENTS = 10_000_000

_NIL = type(None)
_TYPE_NAMES = {int: "int", str: "str", bool: "bool", float: "float", dict: "map", list: "array", _NIL: "nil"}


class Field(NamedTuple):
    """One field of a request: its key, the msgpack types its value may have (empty: any value, ``shown`` says
    which), whether a request must carry it, and the error code of a request that breaks that (None: the judge
    reads the field itself, as docs/PROTOCOL.md §5 says)."""

    key: str
    types: tuple[type, ...]
    required: bool = False
    code: str | None = "malformed"
    shown: str = "value"

    @property
    def type_name(self) -> str:
        """The field's type as docs/PROTOCOL.md writes it: ``int``, ``str or nil``, ``int, array, or nil``."""
        names = [_TYPE_NAMES[t] for t in self.types]
        if not names:
            return self.shown
        return names[0] if len(names) == 1 else (" or ".join(names) if len(names) == 2
                                                 else ", ".join(names[:-1]) + ", or " + names[-1])


_T = Field("t", (str,), True)
_TOKEN = Field("k", (str,), True, "unknown_token")
_SEQ = Field("s", (int,), True)
_ECHOED = Field("s", (int,), code=None)  # echoed in the reply as sent
_RETRY = Field("retry", (bool,), code=None)  # a retransmit only when true
_OPTIONS = Field("opt", (dict, _NIL))

REQUESTS: dict[str, tuple[Field, ...]] = {
    "hello": (_T, Field("v", (int,), True, "bad_version"), _ECHOED, Field("k", (str, _NIL), code="unknown_token"),
              Field("auth", (str, _NIL), code=None), Field("n", (int, _NIL), code=None),
              Field("max_t", (int, _NIL), code=None), Field("body", (str, _NIL), code=None),
              Field("h", (str, _NIL), code=None)),
    "reset": (_T, _TOKEN, _SEQ, Field("seed", (int, _NIL)), _OPTIONS, _RETRY),
    "step": (_T, _TOKEN, _SEQ, Field("a", (), True), _RETRY),
    "vreset": (_T, _TOKEN, _SEQ, Field("seed", (int, list, _NIL)), _OPTIONS, _RETRY),
    "vstep": (_T, _TOKEN, _SEQ, Field("a", (), True, shown="array"), _RETRY),
    "ping": (_T, _TOKEN, _ECHOED),
    "render": (_T, _TOKEN, _ECHOED),
    "close": (_T, _TOKEN, _ECHOED),
}
REQUEST_TYPES = frozenset(REQUESTS)


def check_request(header: dict[str, Any]) -> str:
    """The request's type, once its fields are those :data:`REQUESTS` declares for it (ProtocolError otherwise,
    naming the field: ``unknown_type`` for a type the protocol lacks, with the nearest one's name)."""
    kind = header["t"]
    fields = REQUESTS.get(kind)
    if fields is None:
        close = difflib.get_close_matches(kind, REQUESTS, n=1) if isinstance(kind, str) else []
        hint = f'; did you mean "{close[0]}"?' if close else f"; expected one of {', '.join(REQUESTS)}"
        raise ProtocolError("unknown_type", f"unknown request type {kind[:40]!r}{hint}")
    for field in fields:
        if field.code is None:
            continue
        if field.key not in header:
            if field.required:
                raise ProtocolError(field.code, f"a {kind} request carries field {field.key!r} ({field.type_name})")
        elif field.types and type(header[field.key]) not in field.types:
            raise ProtocolError(field.code, f"field {field.key!r} of a {kind} request must be {field.type_name}")
    return kind
