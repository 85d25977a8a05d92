"""The binary hot path (docs/PROTOCOL.md §4): step and reset requests and their replies as one fixed frame each
(a header, then raw values), for the fixed-size values of Discrete, Box, MultiDiscrete and MultiBinary spaces in
their little-endian dtype; vector sessions' stacked actions and replies likewise. Frames start with 0xC1, a byte
msgpack never uses."""
from __future__ import annotations

import struct
from typing import Any, Callable

import numpy as np
from gymnasium import spaces

from slm_lab_like.array_spaces import space_shape
from slm_lab_like.remote.protocol.codec import element_count
from slm_lab_like.remote.protocol.errors import ProtocolError
from slm_lab_like.remote.protocol.spaces import DISCRETE_TABLE_SIZE

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
