"""Wire protocol of the remote-environment judge: msgpack header frame plus raw numpy buffer frames.

By concern: `messages` (the version, request types and limits), `errors` (the typed errors), `codec` (messages as
frames: msgpack with numpy arrays, no pickle), `spaces` (space descriptions and values by their space), `binary` (the
fixed frames of the hot path) and `addresses`. docs/PROTOCOL.md is the whole protocol, written to implement from.

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
from slm_lab_like.remote.protocol.messages import (
    PROTOCOL_VERSION,
    MAX_SEED,
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_FRAMES,
    MAX_SPACE_DEPTH,
    MAX_SPACE_ELEMENTS,
    REQUEST_TYPES,
    REQUESTS,
    Field,
    check_request,
)
from slm_lab_like.remote.protocol.errors import (
    ProtocolError,
    RemoteError,
    remote_error,
    JudgeTimeout,
    error_header,
)
from slm_lab_like.remote.protocol.codec import (
    INLINE_ARRAY_BYTES,
    check_dtype,
    element_count,
    check_shape,
    Encoder,
    encode,
    BadArray,
    decode,
    fresh_copy,
    sanitize_info,
)
from slm_lab_like.remote.protocol.spaces import (
    DISCRETE_TABLE_SIZE,
    describe_space,
    build_space,
    to_wire,
    from_wire,
    array_from_wire,
    make_value_decoder,
    make_action_checker,
    encode_discrete,
    make_value_encoder,
    null_action,
)
from slm_lab_like.remote.protocol.binary import (
    BIN_MAGIC,
    BIN_STEP,
    BIN_RESET,
    BIN_STEP_REPLY,
    BIN_RESET_REPLY,
    BIN_VSTEP,
    BIN_VRESET,
    BIN_VSTEP_REPLY,
    BIN_VRESET_REPLY,
    BIN_REQ,
    BIN_REP,
    BIN_SEED,
    FLAG_RETRY,
    FLAG_SEED,
    FLAG_TERMINATED,
    FLAG_TRUNCATED,
    FLAG_OBS_FRAME,
    BIN_INLINE_OBS_BYTES,
    FixedCodec,
    make_fixed_codec,
    wire_layout,
    VectorCodec,
    make_vector_codec,
)
from slm_lab_like.remote.protocol.addresses import (
    tcp_host_port,
    is_loopback,
)

__all__ = [
    "PROTOCOL_VERSION",
    "MAX_SEED",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "MAX_FRAMES",
    "MAX_SPACE_DEPTH",
    "MAX_SPACE_ELEMENTS",
    "REQUEST_TYPES",
    "REQUESTS",
    "Field",
    "check_request",
    "ProtocolError",
    "RemoteError",
    "remote_error",
    "JudgeTimeout",
    "error_header",
    "INLINE_ARRAY_BYTES",
    "check_dtype",
    "element_count",
    "check_shape",
    "Encoder",
    "encode",
    "BadArray",
    "decode",
    "fresh_copy",
    "sanitize_info",
    "DISCRETE_TABLE_SIZE",
    "describe_space",
    "build_space",
    "to_wire",
    "from_wire",
    "array_from_wire",
    "make_value_decoder",
    "make_action_checker",
    "encode_discrete",
    "make_value_encoder",
    "null_action",
    "BIN_MAGIC",
    "BIN_STEP",
    "BIN_RESET",
    "BIN_STEP_REPLY",
    "BIN_RESET_REPLY",
    "BIN_VSTEP",
    "BIN_VRESET",
    "BIN_VSTEP_REPLY",
    "BIN_VRESET_REPLY",
    "BIN_REQ",
    "BIN_REP",
    "BIN_SEED",
    "FLAG_RETRY",
    "FLAG_SEED",
    "FLAG_TERMINATED",
    "FLAG_TRUNCATED",
    "FLAG_OBS_FRAME",
    "BIN_INLINE_OBS_BYTES",
    "FixedCodec",
    "make_fixed_codec",
    "wire_layout",
    "VectorCodec",
    "make_vector_codec",
    "tcp_host_port",
    "is_loopback",
]
