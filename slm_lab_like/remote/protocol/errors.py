"""The protocol's errors: ProtocolError (a message that breaks the protocol, answered with its typed code), RemoteError
(a judge's typed error reply, as a client raises it), JudgeTimeout, and the error reply's header."""
from __future__ import annotations

from typing import Any


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


def error_header(code: str, message: str, seq: Any = None, retry_after: float | None = None) -> dict:
    """Build the typed error reply header (``retry``: seconds after which the request may succeed)."""
    header: dict[str, Any] = {"t": "error", "s": seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
              "code": code, "msg": message[:500]}
    if retry_after is not None:
        header["retry"] = round(max(0.0, float(retry_after)), 3)
    return header
