"""Wire protocol of the remote-environment judge: msgpack header frame plus raw numpy buffer frames.

A message is a ZeroMQ multipart message ``[header, buf0, buf1, ...]``. The header is a msgpack map
with short keys (``t`` type, ``k`` token, ``s`` sequence number, ...). A numpy array anywhere in the
header is replaced by a msgpack ExtType: small arrays (<= 4 KiB) carry dtype, shape and raw bytes inline
(code 2); larger ones (code 1) name the index of the raw buffer frame holding their bytes, so big
observations travel without per-number encoding (and without copies from 64 KiB on).
Nothing is ever pickled: decoding accepts only plain msgpack data and numeric numpy dtypes, and every
size is checked before memory is allocated.

Hot path: when the judge's welcome says ``"bin": 1``, the client may send ``step`` and ``reset`` requests as
one fixed binary frame (:data:`BIN_REQ` header, then the raw action or seed) and gets a fixed binary reply
(:data:`BIN_REP` header, then the raw observation inline or in a second frame). Binary frames start with
0xC1, a byte msgpack never uses, so they cannot be mistaken for msgpack headers. Only fixed-size values of
Discrete, Box, MultiDiscrete and MultiBinary spaces in their exact little-endian dtype travel this way;
everything else (other spaces, other dtypes, non-empty infos, reset options, errors, the handshake) uses
the msgpack messages, and either side may always answer a binary request with a msgpack reply.

Vector sessions (a ``hello`` with ``"n": N``) host N copies of the env for one client and step them all in one
round trip: ``vreset`` / ``vstep`` (msgpack) or :data:`BIN_VRESET` / :data:`BIN_VSTEP` (binary: the N actions
stacked in the action space's wire dtype). The binary reply is one frame: the :data:`BIN_REP` header, then N
float64 rewards, N terminated bytes, N truncated bytes, the N observations, and the final observations of the
copies whose episode ended (in index order). Copies reset themselves when their episode ends, in the same step
(gymnasium's SAME_STEP autoreset): the observation is the next episode's first, the final one comes apart.

A refused request may carry ``retry`` (seconds): when to ask again (``busy``, ``full``).
"""

from __future__ import annotations

import ipaddress
import re
import struct
import threading
from typing import Any, Callable, Sequence

import msgpack
import numpy as np
from gymnasium import spaces

from slm_lab_like.array_spaces import space_shape

PROTOCOL_VERSION = 1
MAX_SEED = 2**63 - 1  # a reset seed is a non-negative int64
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
MAX_FRAMES = 64
MAX_SPACE_DEPTH = 8
MAX_SPACE_ELEMENTS = 10_000_000
_EXT_ARRAY = 1
_EXT_INLINE_ARRAY = 2
INLINE_ARRAY_BYTES = 4096
_DTYPE_RE = re.compile(r"^[<>|=]?[iu][1248]$|^[<>|=]?f[248]$|^[<>|=]?c(8|16)$|^\|?b1$")  # what numpy reads

REQUEST_TYPES = frozenset({"hello", "reset", "step", "close", "ping", "render", "vreset", "vstep"})

# binary hot path ------------------------------------------------------------------------------
BIN_MAGIC = 0xC1
BIN_STEP = b"\xc1S"
BIN_RESET = b"\xc1R"
BIN_STEP_REPLY = b"\xc1s"
BIN_RESET_REPLY = b"\xc1r"
BIN_VSTEP = b"\xc1V"
BIN_VRESET = b"\xc1W"
BIN_VSTEP_REPLY = b"\xc1v"
BIN_VRESET_REPLY = b"\xc1w"
BIN_REQ = struct.Struct("<2sB5xq16s")
"""Binary request header: tag, flags, sequence number, raw 16-byte token; then the action (step) or an
int64 seed (reset with :data:`FLAG_SEED`)."""
BIN_REP = struct.Struct("<2sB5xqd")
"""Binary reply header: tag, flags, sequence number, reward; then the observation (inline, or alone in a
second frame with :data:`FLAG_OBS_FRAME`)."""
BIN_SEED = struct.Struct("<q")
FLAG_RETRY = 1
FLAG_SEED = 2
FLAG_TERMINATED = 1
FLAG_TRUNCATED = 2
FLAG_OBS_FRAME = 4
BIN_INLINE_OBS_BYTES = 4096
DISCRETE_TABLE_SIZE = 1024  # Discrete spaces up to this size decode values from a table of their numpy scalars


class ProtocolError(Exception):
    """A message that does not follow the protocol; ``code`` is the typed error sent back (with ``retry_after``
    seconds when the request may succeed later)."""

    def __init__(self, code: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retry_after = retry_after


class RemoteError(RuntimeError):
    """The judge answered a request with a typed error reply; ``retry_after`` (seconds) says when to ask again
    when the judge said so (a busy or full judge)."""

    def __init__(self, code: str, message: str, retry_after: float | None = None) -> None:
        hint = f" (retry in {retry_after:.3g} s)" if retry_after is not None else ""
        super().__init__(f"judge error {code}: {message}{hint}")
        self.code = code
        self.message = message
        self.retry_after = retry_after


def remote_error(reply: dict) -> RemoteError:
    """The RemoteError of an error reply header."""
    retry: Any = reply.get("retry")  # a wire value, checked here
    retry_after = float(retry) if type(retry) in (int, float) and 0 <= retry < 1e6 else None
    return RemoteError(str(reply.get("code")), str(reply.get("msg")), retry_after)


class JudgeTimeout(TimeoutError):
    """The judge did not answer within the client's timeout (it may be dead, busy or unreachable)."""


_DTYPES: dict[str, np.dtype] = {}


def check_dtype(name: Any) -> np.dtype:
    """Return the numpy dtype for a wire dtype string, refusing anything but plain numeric types."""
    dtype = _DTYPES.get(name) if isinstance(name, str) else None
    if dtype is None:
        if not isinstance(name, str) or not _DTYPE_RE.match(name):
            raise ProtocolError("malformed", f"unsupported dtype {name!r}")
        dtype = np.dtype(name)
        if len(_DTYPES) < 256:
            _DTYPES[name] = dtype
    return dtype


def element_count(shape: tuple[int, ...]) -> int:
    """Number of elements of an array of ``shape`` (plain Python, faster than numpy for short shapes)."""
    count = 1
    for dim in shape:
        count *= dim
    return count


def check_shape(shape: Any, limit: int = MAX_SPACE_ELEMENTS) -> tuple[int, ...]:
    """Return a validated shape tuple of non-negative ints whose element count stays within ``limit``."""
    if not isinstance(shape, (list, tuple)) or len(shape) > 32:
        raise ProtocolError("malformed", "shape must be a short list of ints")
    count = 1
    for dim in shape:
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 0:
            raise ProtocolError("malformed", "shape must hold non-negative ints")
        count *= dim
        if count > limit:
            raise ProtocolError("too_large", "array has too many elements")
    return tuple(shape)


class Encoder:
    """Packs messages: a header object into msgpack bytes and its arrays into raw buffer frames.

    One encoder (and its reusable msgpack Packer) exists per thread; use :func:`encode`.
    """

    __slots__ = ("frames", "_packer")

    def __init__(self) -> None:
        self.frames: list[Any] = []
        self._packer = msgpack.Packer(default=self._default, use_bin_type=True, autoreset=True)

    def _default(self, obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            if obj.dtype.kind not in "biufc":
                raise TypeError(f"cannot send arrays of dtype {obj.dtype}")
            arr = obj if obj.flags.c_contiguous else np.ascontiguousarray(obj)
            if arr.nbytes <= INLINE_ARRAY_BYTES:
                return msgpack.ExtType(_EXT_INLINE_ARRAY, _inline_prefix(arr) + arr.tobytes())
            self.frames.append(arr)
            meta = msgpack.packb((len(self.frames), arr.dtype.str, arr.shape))
            return msgpack.ExtType(_EXT_ARRAY, meta)
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, (set, frozenset)):
            return list(obj)
        raise TypeError(f"cannot send object of type {type(obj).__name__}")

    def pack(self, header: dict) -> list[Any]:
        """Return the frames ``[header_bytes, *buffers]`` for ``header``."""
        frames: list[Any] = []
        self.frames = frames
        try:
            head = self._packer.pack(header)
        except BaseException:
            self._packer.reset()
            self.frames = []
            raise
        self.frames = []
        if frames:
            return [head, *frames]
        return [head]


_local = threading.local()
_PREFIXES: dict[tuple, bytes] = {}


def _inline_prefix(arr: np.ndarray) -> bytes:
    """msgpack bytes of ``[dtype, shape, <bin header>]`` for an inline array (cached per dtype/shape)."""
    key = (arr.dtype.str, arr.shape)
    prefix = _PREFIXES.get(key)
    if prefix is None:
        n = arr.nbytes
        bin_head = (b"\xc4" + n.to_bytes(1, "big") if n < 256 else b"\xc5" + n.to_bytes(2, "big"))
        prefix = b"\x93" + msgpack.packb(key[0]) + msgpack.packb(list(key[1])) + bin_head
        if len(_PREFIXES) < 1024:
            _PREFIXES[key] = prefix
    return prefix


def encode(header: dict) -> list[Any]:
    """Encode a message header (which may hold numpy arrays) into ZeroMQ frames."""
    try:
        enc = _local.encoder
    except AttributeError:
        enc = _local.encoder = Encoder()
    return enc.pack(header)


def _inline_array(data: bytes) -> np.ndarray:
    """Decode a small array carried inside the header as (dtype, shape, raw bytes)."""
    meta = msgpack.unpackb(data, raw=False)
    if type(meta) is not list or len(meta) != 3 or type(meta[2]) is not bytes:
        raise ProtocolError("malformed", "bad inline array")
    dtype = check_dtype(meta[0])
    shape = check_shape(meta[1])
    if element_count(shape) * dtype.itemsize != len(meta[2]):
        raise ProtocolError("malformed", "inline array size does not match its shape and dtype")
    return np.frombuffer(meta[2], dtype=dtype).reshape(shape)


def _nbytes(buf: Any) -> int:
    """Size in bytes of a frame (bytes, zmq.Frame or any buffer)."""
    return len(buf) if type(buf) is bytes else memoryview(buf).nbytes


class BadArray:
    """Stands for an array the decoder could not read (unknown dtype, wrong size, bad frame index): an action
    holding one is an invalid action; anywhere else it makes the message malformed."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"BadArray({self.reason!r})"


class _ExtReader:
    """msgpack extension hook of one message: reads its arrays, counting the unreadable ones as BadArray."""

    __slots__ = ("frames", "used", "bad")

    def __init__(self, frames: Sequence[Any]) -> None:
        self.frames = frames
        self.used: set[int] = set()
        self.bad = 0

    def __call__(self, code: int, data: bytes) -> Any:
        try:
            if code == _EXT_INLINE_ARRAY:
                return _inline_array(data)
            if code != _EXT_ARRAY or len(self.frames) == 1:
                raise ProtocolError("malformed", f"extension type {code} is not allowed here")
            return self._frame_array(data)
        except ProtocolError as exc:
            if exc.code != "malformed":
                raise
            reason = exc.message
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            reason = f"undecodable array ({type(exc).__name__})"
        self.bad += 1
        return BadArray(reason)

    def _frame_array(self, data: bytes) -> np.ndarray:
        """An array whose bytes travel in their own frame, named by index in the descriptor."""
        meta = msgpack.unpackb(data, raw=False)
        if type(meta) is not list or len(meta) != 3:
            raise ProtocolError("malformed", "bad array descriptor")
        index, dtype_name, shape = meta
        if type(index) is not int or not 0 < index < len(self.frames) or index in self.used:
            raise ProtocolError("malformed", "bad array frame index")
        self.used.add(index)
        dtype = check_dtype(dtype_name)
        shape_t = check_shape(shape)
        buf = self.frames[index]
        if element_count(shape_t) * dtype.itemsize != _nbytes(buf):
            raise ProtocolError("malformed", "array frame size does not match its shape and dtype")
        return np.frombuffer(buf, dtype=dtype).reshape(shape_t)


def decode(frames: Sequence[Any], max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> dict:
    """Decode ZeroMQ frames into a header dict whose arrays are read-only views of the buffer frames.

    An unreadable array inside the action ``a`` stays in the header as a :class:`BadArray` (the action
    checkers refuse it as ``invalid_action``); anywhere else the whole message is ``malformed``.
    """
    if not frames:
        raise ProtocolError("malformed", "empty message")
    if len(frames) > MAX_FRAMES:
        raise ProtocolError("malformed", "too many frames")
    total = sum(map(_nbytes, frames))
    if total > max_bytes:
        raise ProtocolError("too_large", f"message of {total} bytes exceeds the limit of {max_bytes}")
    reader = _ExtReader(frames)
    header = _decode_header(frames[0], reader)
    if reader.bad and _count_bad(header.get("a")) != reader.bad:
        raise ProtocolError("malformed", "unreadable array outside the action")
    return header


def _count_bad(value: Any, depth: int = 0) -> int:
    """Number of BadArray stand-ins in a decoded value (nesting past 64 levels is not searched)."""
    if type(value) is BadArray:
        return 1
    if depth > 64:
        return 0
    if type(value) is list:
        return sum(_count_bad(v, depth + 1) for v in value)
    if type(value) is dict:
        return sum(_count_bad(v, depth + 1) for v in value.values())
    return 0


def _decode_header(head: Any, ext_hook: Callable[[int, bytes], Any]) -> dict:
    """Unpack the msgpack header frame and check that it is a typed message."""
    try:
        header = msgpack.unpackb(
            head,
            ext_hook=ext_hook,
            raw=False,
            strict_map_key=True,
            max_array_len=1_000_000,
            max_map_len=100_000,
        )
    except ProtocolError:
        raise
    except Exception as exc:
        raise ProtocolError("malformed", f"undecodable header: {type(exc).__name__}") from None
    if not isinstance(header, dict) or not isinstance(header.get("t"), str):
        raise ProtocolError("malformed", "header must be a map with a string 't'")
    return header


def error_header(code: str, message: str, seq: Any = None, retry_after: float | None = None) -> dict:
    """Build the typed error reply header (``retry``: seconds after which the request may succeed)."""
    header: dict[str, Any] = {"t": "error", "s": seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
              "code": code, "msg": message[:500]}
    if retry_after is not None:
        header["retry"] = round(max(0.0, float(retry_after)), 3)
    return header


# ---------------------------------------------------------------------------------------------
# space description codec: gymnasium spaces <-> plain msgpack-safe dicts


def _array_desc(arr: np.ndarray) -> dict:
    arr = np.ascontiguousarray(arr)
    return {"dtype": arr.dtype.str, "shape": list(arr.shape), "data": arr.tobytes()}


def _array_from_desc(desc: Any) -> np.ndarray:
    if not isinstance(desc, dict) or not isinstance(desc.get("data"), bytes):
        raise ProtocolError("malformed", "bad array description")
    dtype = check_dtype(desc.get("dtype"))
    shape = check_shape(desc.get("shape"))
    if element_count(shape) * dtype.itemsize != len(desc["data"]):
        raise ProtocolError("malformed", "array description size mismatch")
    return np.frombuffer(desc["data"], dtype=dtype).reshape(shape).copy()


def describe_space(space: spaces.Space) -> dict:
    """Describe a gymnasium space as a plain dict (ints, strings, bytes) for the handshake."""
    if isinstance(space, spaces.Box):
        return {"type": "Box", "dtype": space.dtype.str, "shape": list(space.shape),
                "low": _array_desc(space.low), "high": _array_desc(space.high)}
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start), "dtype": space.dtype.str}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": _array_desc(space.nvec), "start": _array_desc(space.start),
                "dtype": space.dtype.str}
    if isinstance(space, spaces.MultiBinary):
        n = space.n
        return {"type": "MultiBinary", "n": list(n) if isinstance(n, (tuple, list, np.ndarray)) else int(n)}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [describe_space(s) for s in space.spaces]}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {str(k): describe_space(s) for k, s in space.spaces.items()}}
    raise TypeError(f"space {type(space).__name__} cannot be described for the remote protocol")


def build_space(desc: Any, depth: int = 0) -> spaces.Space:
    """Rebuild a gymnasium space from its description, validating every field."""
    if depth > MAX_SPACE_DEPTH or not isinstance(desc, dict):
        raise ProtocolError("malformed", "bad space description")
    kind = desc.get("type")
    if kind == "Box":
        dtype = check_dtype(desc.get("dtype"))
        shape = check_shape(desc.get("shape"))
        low, high = _array_from_desc(desc.get("low")), _array_from_desc(desc.get("high"))
        if low.shape != shape or high.shape != shape:
            raise ProtocolError("malformed", "Box bounds do not match its shape")
        return spaces.Box(low=low.astype(dtype), high=high.astype(dtype), shape=shape, dtype=dtype)
    if kind == "Discrete":
        n, start = desc.get("n"), desc.get("start", 0)
        if not isinstance(n, int) or not isinstance(start, int) or n <= 0:
            raise ProtocolError("malformed", "bad Discrete space")
        return spaces.Discrete(n, start=start, dtype=check_dtype(desc.get("dtype", "<i8")))
    if kind == "MultiDiscrete":
        nvec, start = _array_from_desc(desc.get("nvec")), _array_from_desc(desc.get("start"))
        return spaces.MultiDiscrete(nvec, start=start, dtype=check_dtype(desc.get("dtype", "<i8")))
    if kind == "MultiBinary":
        n = desc.get("n")
        if isinstance(n, list):
            return spaces.MultiBinary(list(check_shape(n)))
        if not isinstance(n, int) or n <= 0 or n > MAX_SPACE_ELEMENTS:
            raise ProtocolError("malformed", "bad MultiBinary space")
        return spaces.MultiBinary(n)
    if kind == "Tuple":
        subs = desc.get("spaces")
        if not isinstance(subs, list) or len(subs) > 1024:
            raise ProtocolError("malformed", "bad Tuple space")
        return spaces.Tuple([build_space(s, depth + 1) for s in subs])
    if kind == "Dict":
        subs = desc.get("spaces")
        if not isinstance(subs, dict) or len(subs) > 1024:
            raise ProtocolError("malformed", "bad Dict space")
        return spaces.Dict({str(k): build_space(s, depth + 1) for k, s in subs.items()})
    raise ProtocolError("malformed", f"unknown space type {kind!r}")


# ---------------------------------------------------------------------------------------------
# values <-> wire, guided by the space


def to_wire(space: spaces.Space, value: Any) -> Any:
    """Convert an observation or action into msgpack-friendly data (arrays stay arrays)."""
    if isinstance(space, spaces.Discrete):
        return int(value)
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        return np.asarray(value)
    if isinstance(space, spaces.Tuple):
        return [to_wire(s, v) for s, v in zip(space.spaces, value)]
    if isinstance(space, spaces.Dict):
        return {k: to_wire(s, value[k]) for k, s in space.spaces.items()}
    raise TypeError(f"unsupported space {type(space).__name__}")


def from_wire(space: spaces.Space, value: Any) -> Any:
    """Convert wire data back into a fresh value of the space's dtype and structure (``invalid_action`` else)."""
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        return array_from_wire(space, value)
    if isinstance(space, spaces.Discrete):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ProtocolError("invalid_action", "expected an integer")
        if not -2**63 <= int(value) < 2**63:
            raise ProtocolError("invalid_action", "integer out of range")
        return space.dtype.type(value)
    if isinstance(space, spaces.Tuple):
        if type(value) is not list or len(value) != len(space.spaces):
            raise ProtocolError("invalid_action", "expected a list for a Tuple space")
        return tuple(from_wire(s, v) for s, v in zip(space.spaces, value))
    if isinstance(space, spaces.Dict):
        if type(value) is not dict or set(value) != set(space.spaces):
            raise ProtocolError("invalid_action", "expected a map with the Dict space's keys")
        return {k: from_wire(s, value[k]) for k, s in space.spaces.items()}
    raise ProtocolError("invalid_action", f"unsupported space {type(space).__name__}")


def array_from_wire(space: spaces.Space, value: Any) -> np.ndarray:
    """A fresh array of an array space's dtype and shape from a wire array, number or nested list of numbers.

    Anything else is ``invalid_action``: strings (numeric ones too), bytes, maps, ragged or too deeply nested
    lists, complex values, and for integer dtypes values that are not whole or do not fit the dtype.
    """
    dtype, shape = np.dtype(space.dtype), space_shape(space)
    if type(value) is np.ndarray:
        arr = value
    elif _numbers_nested(value, len(shape)):
        try:
            arr = np.array(value)
        except (ValueError, OverflowError, TypeError):
            raise ProtocolError("invalid_action", "expected a rectangular array of numbers") from None
    else:
        raise ProtocolError("invalid_action", f"expected numbers in lists nested {len(shape)} deep")
    if arr.dtype.kind not in "biuf":
        raise ProtocolError("invalid_action", f"expected real numbers, got dtype {arr.dtype.str}")
    if arr.shape != shape:
        raise ProtocolError("invalid_action", f"expected shape {shape}, got {arr.shape}")
    if dtype.kind in "biu" and arr.size:
        _check_integral(arr, dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return arr.astype(dtype)


_WIRE_NUMBERS = (int, float, bool)


def _numbers_nested(value: Any, depth: int) -> bool:
    """Whether ``value`` is a number (depth 0), or lists nested exactly ``depth`` deep around numbers."""
    if type(value) is list:
        return depth > 0 and all(_numbers_nested(v, depth - 1) for v in value)
    return depth == 0 and type(value) in _WIRE_NUMBERS


def _check_integral(arr: np.ndarray, dtype: np.dtype) -> None:
    """Refuse values an integer dtype cannot hold exactly: fractions, NaN, infinities, out-of-range numbers."""
    low, high = (0, 1) if dtype.kind == "b" else (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all() or (arr != np.floor(arr)).any():
            raise ProtocolError("invalid_action", "expected whole numbers")
        if arr.min() < float(low) or arr.max() >= float(high) + 1.0:
            raise ProtocolError("invalid_action", f"values out of the range of {dtype}")
    elif arr.min() < low or arr.max() > high:
        raise ProtocolError("invalid_action", f"values out of the range of {dtype}")


def make_value_decoder(space: spaces.Space) -> Callable[[Any], Any]:
    """Return a fast decoder for values of ``space`` (specialised for flat Box and Discrete spaces)."""
    if isinstance(space, spaces.Box):
        dtype, shape = space.dtype, space.shape

        def decode_box(value: Any) -> np.ndarray:
            if type(value) is np.ndarray and value.dtype == dtype and value.shape == shape:
                return value.copy()
            return array_from_wire(space, value)
        return decode_box
    if isinstance(space, spaces.Discrete):
        scalar = space.dtype.type

        def decode_discrete(value: Any) -> Any:
            if type(value) is int and -2**63 <= value < 2**63:
                return scalar(value)
            return from_wire(space, value)
        return decode_discrete
    return lambda value: from_wire(space, value)


def make_action_checker(space: spaces.Space) -> Callable[[Any], Any]:
    """Return a callable that decodes a wire action and raises ``invalid_action`` unless it is in ``space``."""
    if isinstance(space, spaces.Discrete):
        scalar, low, high = space.dtype.type, int(space.start), int(space.start) + int(space.n)

        def check_discrete(value: Any) -> Any:
            if type(value) is not int or not low <= value < high:
                raise ProtocolError("invalid_action", "action is not in the action space")
            return scalar(value)
        return check_discrete
    decode_value, contains = make_value_decoder(space), space.contains

    def check(value: Any) -> Any:
        action = decode_value(value)
        if not contains(action):
            raise ProtocolError("invalid_action", "action is not in the action space")
        return action
    return check


def encode_discrete(value: Any) -> Any:
    """A Discrete action for the wire: what gymnasium's ``Discrete.contains`` takes as an integer (Python int or bool,
    numpy integer, 0-d integer array) as an int; anything else as a value the judge refuses as ``invalid_action``
    (never rounded, as ``Discrete.contains`` rounds none)."""
    if isinstance(value, (int, np.integer)):
        return int(value) if -2**63 <= value < 2**63 else str(value)
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "iu":
        return int(value)
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    return value if isinstance(value, (float, str, bool, list, tuple, type(None))) else repr(value)


def make_value_encoder(space: spaces.Space) -> Callable[[Any], Any]:
    """Return a fast encoder for values of ``space`` (specialised for flat Box and Discrete spaces)."""
    if isinstance(space, spaces.Discrete):
        return encode_discrete
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        return np.asarray
    return lambda value: to_wire(space, value)


class FixedCodec:
    """Raw little-endian bytes of the fixed-size values of one space, for the binary hot path.

    ``pack(value)`` returns the bytes, or None when the value is not exactly of the space's wire form
    (then the msgpack path, with its own conversions and checks, carries it). ``unpack(buf, offset)``
    returns a fresh value (a writable array of the space's dtype, or a numpy scalar); ``check(buf, offset)``
    does the same and raises ``invalid_action`` unless the value is in the space. ``empty()`` returns a
    fresh array to receive an observation into (arrays only, None for Discrete).
    """

    __slots__ = ("nbytes", "pack", "unpack", "check", "empty")

    def __init__(self, nbytes: int, pack: Callable, unpack: Callable, check: Callable, empty: Callable | None):
        self.nbytes, self.pack, self.unpack, self.check, self.empty = nbytes, pack, unpack, check, empty


def make_fixed_codec(space: spaces.Space) -> FixedCodec | None:
    """Return the binary codec of ``space``, or None when its values have no fixed raw layout."""
    if type(space) is spaces.Discrete:
        q = struct.Struct("<q")
        scalar, low, high = space.dtype.type, int(space.start), int(space.start) + int(space.n)
        q_pack, q_unpack = q.pack, q.unpack_from
        # numpy builds a scalar from an int by way of a 0-d array (about a microsecond); a small space's values
        # are made once (numpy scalars are immutable, so sharing them is safe)
        table = [scalar(v) for v in range(low, high)] if high - low <= DISCRETE_TABLE_SIZE else None

        def pack_discrete(value: Any) -> bytes | None:
            if type(value) is not int and not isinstance(value, np.integer):
                return None
            try:
                return q_pack(int(value))
            except (struct.error, OverflowError):
                return None

        def unpack_discrete(buf: Any, offset: int) -> Any:
            value = q_unpack(buf, offset)[0]
            return table[value - low] if table is not None and low <= value < high else scalar(value)

        def check_discrete(buf: Any, offset: int) -> Any:
            value = q_unpack(buf, offset)[0]
            if not low <= value < high:
                raise ProtocolError("invalid_action", "action is not in the action space")
            return scalar(value) if table is None else table[value - low]
        return FixedCodec(8, pack_discrete, unpack_discrete, check_discrete, None)
    if type(space) not in (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary):
        return None
    dtype, shape = np.dtype(space.dtype), space_shape(space)
    if dtype.kind not in "biuf" or dtype.newbyteorder("<") != dtype:
        return None
    count = element_count(shape)
    contains, frombuffer, empty = space.contains, np.frombuffer, np.empty
    flat = len(shape) == 1

    def pack_array(value: Any) -> bytes | None:
        if type(value) is not np.ndarray or value.shape != shape or value.dtype != dtype:
            return None
        return value.tobytes()

    if flat:
        def unpack_array(buf: Any, offset: int) -> np.ndarray:
            return frombuffer(buf, dtype, count, offset).copy()
    else:
        def unpack_array(buf: Any, offset: int) -> np.ndarray:
            return frombuffer(buf, dtype, count, offset).reshape(shape).copy()

    def check_array(buf: Any, offset: int) -> np.ndarray:
        value = unpack_array(buf, offset)
        if not contains(value):
            raise ProtocolError("invalid_action", "action is not in the action space")
        return value

    return FixedCodec(count * dtype.itemsize, pack_array, unpack_array, check_array, lambda: empty(shape, dtype))


def wire_layout(space: spaces.Space) -> tuple[np.dtype, tuple[int, ...]] | None:
    """The raw wire dtype and shape of one value of ``space`` (Discrete travels as int64), or None when its values
    have no fixed raw layout."""
    if type(space) is spaces.Discrete:
        return np.dtype("<i8"), ()
    if type(space) not in (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary):
        return None
    dtype = np.dtype(space.dtype)
    if dtype.kind not in "biuf" or dtype.newbyteorder("<") != dtype:
        return None
    return dtype, space_shape(space)


class VectorCodec:
    """Raw layout of a vector session's binary messages: N stacked actions, and the reply frame of N rewards,
    terminated and truncated flags, N observations and the final observations of the copies that ended.

    Both sides know N and the spaces, so every size is checked before anything is read.
    """

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, n: int) -> None:
        obs_layout, act_layout = wire_layout(observation_space), wire_layout(action_space)
        if obs_layout is None or act_layout is None:
            raise ValueError("vector sessions need spaces with a fixed raw layout")
        from gymnasium.vector.utils import batch_space

        self.n = n
        self.obs_dtype, self.obs_shape = obs_layout
        self.act_dtype, self.act_shape = act_layout
        self.obs_nbytes = element_count(self.obs_shape) * self.obs_dtype.itemsize
        self.act_nbytes = element_count(self.act_shape) * self.act_dtype.itemsize
        self.obs_out = np.dtype(observation_space.dtype)
        self.act_space = action_space
        self._scalars = struct.Struct(f"<{n}d{2 * n}?")
        self.act_batch = batch_space(action_space, n)
        self.act_out = np.dtype(action_space.dtype)
        # Discrete actions (int64 on the wire) are read and checked as one struct of N Python ints: a few
        # microseconds less per step than numpy's conversions and reductions over N values.
        self._act_ints: struct.Struct | None = None
        self._act_low = self._act_high = 0
        if type(action_space) is spaces.Discrete:
            self._act_ints = struct.Struct(f"<{n}q")
            self._act_low = int(action_space.start)
            self._act_high = self._act_low + int(action_space.n)

    def pack_actions(self, actions: Any) -> bytes | None:
        """The raw bytes of N stacked actions, or None when they are not exactly of the wire form (integers given
        as other integer types are converted when no value changes)."""
        arr = actions if type(actions) is np.ndarray else np.asarray(actions)
        if arr.shape != (self.n, *self.act_shape):
            return None
        if arr.dtype != self.act_dtype:
            if arr.dtype.kind not in "biu" or self.act_dtype.kind not in "iu":
                return None
            cast = arr.astype(self.act_dtype)
            if not np.array_equal(cast, arr):
                return None
            arr = cast
        return arr.tobytes()

    def unpack_actions(self, frame: bytes, offset: int) -> list:
        """The N actions of a binary request, one per copy; ``invalid_action`` unless each is in the space."""
        if len(frame) - offset != self.n * self.act_nbytes:
            raise ProtocolError("malformed", "binary vector step of the wrong size for the action space")
        if self._act_ints is not None:
            values = self._act_ints.unpack_from(frame, offset)
            if min(values) < self._act_low or max(values) >= self._act_high:
                raise ProtocolError("invalid_action", "an action is not in the action space")
            return list(values)
        raw = np.frombuffer(frame, self.act_dtype, self.n * element_count(self.act_shape), offset)
        return self.check_actions(raw.reshape((self.n, *self.act_shape)))

    def check_actions(self, arr: np.ndarray) -> list:
        """The N actions, one per copy (Python ints for Discrete, rows of a fresh array of the space's dtype
        otherwise); ``invalid_action`` unless each is in the space."""
        out = arr.astype(self.act_out)
        if arr.dtype != out.dtype and self.act_out.kind in "iu" and not np.array_equal(out, arr):
            raise ProtocolError("invalid_action", "an action is not in the action space")
        space = self.act_space
        if type(space) is spaces.Discrete:
            ok = out.min() >= space.start and out.max() < space.start + space.n
        elif type(space) is spaces.Box:
            ok = bool(np.all(out >= space.low) and np.all(out <= space.high))
        else:
            ok = self.act_batch.contains(out)
        if not ok:
            raise ProtocolError("invalid_action", "an action is not in the action space")
        return out.tolist() if type(space) is spaces.Discrete else list(out)

    def pack_reply(self, head: bytes, rewards: list[float], terminated: list[bool], truncated: list[bool],
                   obs: np.ndarray, finals: np.ndarray | None) -> bytes:
        """One reply frame: header, rewards (float64), flags (one byte each), observations, final observations."""
        parts = [head, self._scalars.pack(*rewards, *terminated, *truncated), obs.astype(self.obs_dtype, copy=False)
                 .tobytes()]
        if finals is not None and len(finals):
            parts.append(finals.astype(self.obs_dtype, copy=False).tobytes())
        return b"".join(parts)

    def unpack_reply(self, frame: bytes, offset: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                                 np.ndarray | None]:
        """Rewards, terminated, truncated, observations and final observations (None when no copy's episode
        ended) of a reply frame, as fresh arrays."""
        n, count = self.n, element_count(self.obs_shape)
        start = offset + 10 * n
        flags = frame[offset + 8 * n:start]
        if len(flags) != 2 * n:
            raise ProtocolError("malformed", "binary vector reply too short")
        terminated = np.frombuffer(flags, np.bool_, n).copy()
        truncated = np.frombuffer(flags, np.bool_, n, n).copy()
        k = 0 if flags.count(0) == 2 * n else int(np.count_nonzero(terminated | truncated))
        if len(frame) != start + (n + k) * self.obs_nbytes:
            raise ProtocolError("malformed", "binary vector reply of the wrong size for the observation space")
        rewards = np.frombuffer(frame, "<f8", n, offset).copy()
        obs = np.frombuffer(frame, self.obs_dtype, n * count, start).reshape((n, *self.obs_shape))
        obs = obs.astype(self.obs_out) if obs.dtype != self.obs_out else obs.copy()
        if not k:
            return rewards, terminated, truncated, obs, None
        finals = np.frombuffer(frame, self.obs_dtype, k * count, start + n * self.obs_nbytes)
        return rewards, terminated, truncated, obs, finals.reshape((k, *self.obs_shape)).astype(self.obs_out)


def make_vector_codec(observation_space: spaces.Space, action_space: spaces.Space, n: int) -> VectorCodec | None:
    """The binary layout of a vector session of ``n`` copies, or None when a space has no fixed raw layout."""
    try:
        return VectorCodec(observation_space, action_space, n)
    except ValueError:
        return None


def null_action(space: spaces.Space) -> Any:
    """Return the do-nothing action given to a silent or dead body: the space's lowest/zero element."""
    if isinstance(space, spaces.Discrete):
        return space.dtype.type(space.start)
    if isinstance(space, spaces.Box):
        return np.clip(np.zeros(space.shape, dtype=space.dtype), space.low, space.high).astype(space.dtype)
    if isinstance(space, spaces.MultiDiscrete):
        return np.array(space.start, dtype=space.dtype)
    if isinstance(space, spaces.MultiBinary):
        return np.zeros(space.shape, dtype=space.dtype)
    if isinstance(space, spaces.Tuple):
        return tuple(null_action(s) for s in space.spaces)
    if isinstance(space, spaces.Dict):
        return {k: null_action(s) for k, s in space.spaces.items()}
    raise TypeError(f"no null action for {type(space).__name__}")


def sanitize_info(info: Any, depth: int = 0) -> Any:
    """Return a copy of an info dict holding only data the wire can carry (other objects become strings)."""
    if depth > 8:
        return None
    if isinstance(info, dict):
        return {str(k): sanitize_info(v, depth + 1) for k, v in info.items()}
    if isinstance(info, (list, tuple)):
        return [sanitize_info(v, depth + 1) for v in info]
    if info is None or isinstance(info, (bool, int, float, str, bytes)):
        return info
    if isinstance(info, np.ndarray):
        return info if info.dtype.kind in "biufc" else info.tolist() if info.size < 1000 else str(info)
    if isinstance(info, np.generic):
        return info.item()
    return str(info)


def tcp_host_port(address: str) -> tuple[str, str] | None:
    """The host and port of a ``tcp://HOST:PORT`` endpoint as written, or None when it is not tcp or has no port."""
    if not address.startswith("tcp://"):
        return None
    host, sep, port = address[len("tcp://"):].rpartition(":")
    return (host, port) if sep else None


def is_loopback(address: str) -> bool:
    """Tell whether a ZeroMQ endpoint only listens locally (loopback TCP, ipc or inproc)."""
    if address.startswith(("ipc://", "inproc://")):
        return True
    if not address.startswith("tcp://"):
        return False
    split = tcp_host_port(address)
    host = (address[len("tcp://"):] if split is None else split[0]).strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
