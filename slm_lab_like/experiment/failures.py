"""A session's failure as one line (SessionFailed), apart from the session's loop so that the command line can catch
it without importing torch (`run_lab.py --help` and argument errors answer in a second)."""
from __future__ import annotations


class SessionFailed(RuntimeError):
    """A session ended by an error (an env or an agent raising mid-run): one line naming the session and, for an env
    step, the env; the traceback goes to the session's error.log (and the debug log), not to the terminal."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(index, message)  # its args rebuild it when it comes back from a worker
        self.index, self.message = index, message

    def __str__(self) -> str:
        return f"session {self.index}: {self.message}"


def joined_failure(failed: list[SessionFailed]) -> SessionFailed:
    """One line for the sessions that failed: the first one's error, and which others failed too."""
    first = failed[0]
    if len(failed) == 1:
        return first
    others = ", ".join(str(e.index) for e in failed[1:])
    return SessionFailed(first.index, f"{first.message}; session(s) {others} failed too (see their error.log)")
