"""Gymnasium spaces as plain msgpack-safe descriptions (the handshake's obs_space and act_space), and values to and
from the wire by their space: encoders, decoders and the judge's action check (docs/PROTOCOL.md §3.4, §3.5)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from gymnasium import spaces

from slm_lab_like.array_spaces import space_shape
from slm_lab_like.remote.protocol.codec import check_dtype, check_shape, element_count
from slm_lab_like.remote.protocol.errors import ProtocolError
from slm_lab_like.remote.protocol.messages import MAX_SPACE_DEPTH, MAX_SPACE_ELEMENTS

DISCRETE_TABLE_SIZE = 1024  # Discrete spaces up to this size decode values from a table of their numpy scalars


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
