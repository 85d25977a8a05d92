"""Messages as ZeroMQ frames: a msgpack header whose numpy arrays travel as ExtTypes, inline up to 4 KiB (dtype, shape
and bytes) or naming the raw buffer frame that holds their bytes. Decoding takes plain msgpack data and numeric
dtypes only, never pickle, and checks every size before it allocates (docs/PROTOCOL.md §3)."""
from __future__ import annotations

import re
import threading
from typing import Any, Callable, Sequence

import msgpack
import numpy as np

from slm_lab_like.remote.protocol.errors import ProtocolError
from slm_lab_like.remote.protocol.messages import DEFAULT_MAX_MESSAGE_BYTES, MAX_FRAMES, MAX_SPACE_ELEMENTS

_EXT_ARRAY = 1
_EXT_INLINE_ARRAY = 2
INLINE_ARRAY_BYTES = 4096
_DTYPE_RE = re.compile(r"^[<>|=]?[iu][1248]$|^[<>|=]?f[248]$|^[<>|=]?c(8|16)$|^\|?b1$")  # what numpy reads


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


def fresh_copy(value: Any) -> Any:
    """A copy that shares no array with ``value`` (arrays copied and made writable, maps, lists and tuples rebuilt):
    an observation or info later steps cannot change, or decoded wire data that holds no reply buffer."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, dict):
        return {k: fresh_copy(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(fresh_copy(v) for v in value)
    if isinstance(value, list):
        return [fresh_copy(v) for v in value]
    return value
