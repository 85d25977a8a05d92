"""One set of judge options: the judge module, ``run_lab.py serve``, :func:`~slm_lab_like.remote.hosting.serve` and
:func:`~slm_lab_like.remote.spawn.spawn_judge` take the same options, by the same names, from this table.

Each option is a keyword of ``serve(...)`` / ``spawn_judge(...)`` and a ``--flag`` of both command lines. Two
differ in form only, never in meaning, because secrets do not belong on a command line: ``secret`` is given
on the command line as the name of an environment variable holding it (``--secret-env NAME``), and
``curve_secret_key`` as a ZeroMQ certificate file holding the judge's CURVE secret key
(``--curve-secret-key FILE``; make one with ``python -c "import zmq.auth; zmq.auth.create_certificates('.',
'judge')"``, which writes judge.key for clients and judge.key_secret for the judge).
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

from slm_lab_like.remote.protocol import DEFAULT_MAX_MESSAGE_BYTES

Z85_KEY_LENGTH = 40  # a CURVE key in z85 text
MAX_SESSIONS = 64
SESSION_TIMEOUT = 600.0
IDLE_TIMEOUT = 30.0
HANDSHAKE_TIMEOUT = 5.0
MAX_PENDING = 32
CLIENT_TIMEOUT = 10.0
ON_TIMEOUT = "null"


class OptionError(ValueError):
    """A judge option that cannot be used (an unset variable, an unreadable key file), in one line."""


@dataclass(frozen=True)
class Option:
    """One judge option: its keyword, which judges take it ("all", "single", "multi"), its default and help."""

    name: str
    judges: str
    default: Any
    help: str
    type: Any = float
    choices: tuple[str, ...] | None = None
    metavar: str | None = None

    @property
    def flag(self) -> str:
        return "--" + {"secret": "secret-env"}.get(self.name, self.name).replace("_", "-")


OPTIONS: tuple[Option, ...] = (
    Option("secret", "all", None, "name of an environment variable holding a shared secret every client must send "
           "(the secret itself never goes on a command line)", str, metavar="NAME"),
    Option("curve_secret_key", "all", None, "ZeroMQ certificate file with the judge's CURVE secret key: traffic is "
           "encrypted, and clients need the public key (printed as curve_public_key)", str, metavar="FILE"),
    Option("max_message_bytes", "all", DEFAULT_MAX_MESSAGE_BYTES, "largest request the judge reads", int,
           metavar="BYTES"),
    Option("spin", "all", None, "seconds the judge keeps polling for the next request by its same-host lane before "
           "it sleeps: less latency for a core's time (for a judge with a core of its own); 0 never spins; default: "
           "1 ms after answering a client in another process that steps in a loop", metavar="SECONDS"),
    Option("max_sessions", "single", MAX_SESSIONS, "single-agent: env copies served at once (a vector client's "
           "copies count one each)", int, metavar="N"),
    Option("max_pending", "single", MAX_PENDING, "single-agent: sessions admitted that have not reset yet; "
           "further hellos are refused as busy, with when to retry", int, metavar="N"),
    Option("handshake_timeout", "single", HANDSHAKE_TIMEOUT, "single-agent: seconds a session may wait for its first "
           "reset before it expires", metavar="SECONDS"),
    Option("session_timeout", "single", SESSION_TIMEOUT, "single-agent: seconds a silent session lives",
           metavar="SECONDS"),
    Option("idle_timeout", "single", IDLE_TIMEOUT, "single-agent: seconds after which a silent session's env "
           "instances go to a new client that a full judge would refuse (that session expires then; with nobody "
           "waiting it lives the session timeout)", metavar="SECONDS"),
    Option("client_timeout", "multi", CLIENT_TIMEOUT, "multi-agent: seconds any waiting request waits for a silent "
           "client before the judge acts for it", metavar="SECONDS"),
    Option("join_timeout", "multi", None, "multi-agent: seconds a game's first reset waits for every body's "
           "client to reset too (default: the client timeout)", metavar="SECONDS"),
    Option("on_timeout", "multi", ON_TIMEOUT, "multi-agent: a silent client's body gets its null action, or is "
           "marked done", str, choices=("null", "done")),
    Option("allow_claim", "multi", False, "multi-agent: a client without a token may claim a free body (default: "
           "only issued tokens are admitted)", bool),
)
BY_NAME = {o.name: o for o in OPTIONS}


def add_judge_options(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """Add every judge option to ``parser`` (unset values stay None, so each judge keeps its own defaults)."""
    for o in OPTIONS:
        shown = "" if o.default is None or o.type is bool else f" (default {o.default})"
        text = f"{prefix}{o.help}{shown}"
        if o.type is bool:
            parser.add_argument(o.flag, dest=o.name, action="store_true", default=None, help=text)
        else:
            parser.add_argument(o.flag, dest=o.name, type=o.type, default=None, choices=o.choices,
                                metavar=o.metavar, help=text)


def judge_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options given on a command line as ``serve(...)`` keywords: the secret read from its variable and the
    CURVE key from its file; OptionError in one line when either cannot be read."""
    options = {o.name: getattr(args, o.name) for o in OPTIONS if getattr(args, o.name, None) is not None}
    if "secret" in options:
        name = options["secret"]
        if not os.environ.get(name):
            raise OptionError(f"--secret-env {name}: the environment variable {name} is not set")
        options["secret"] = os.environ[name]
    if "curve_secret_key" in options:
        options["curve_secret_key"] = read_curve_secret_key(options["curve_secret_key"])
    return options


def read_curve_secret_key(path: str) -> bytes:
    """The CURVE secret key of a ZeroMQ certificate file; OptionError in one line otherwise."""
    import zmq.auth

    try:
        _, secret = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as err:
        raise OptionError(f"--curve-secret-key {path}: cannot read a ZeroMQ certificate: {err}") from None
    if not secret:
        raise OptionError(f"--curve-secret-key {path}: the file holds no secret key (use the .key_secret file)")
    return secret


def curve_public_key(value: Any) -> bytes | None:
    """A judge's public CURVE key as a client takes it: the key itself (40 characters of z85, as `serve` prints it, text
    or bytes) or a certificate file holding it (judge.key); OptionError in one line otherwise."""
    if value is None or (isinstance(value, bytes) and len(value) == Z85_KEY_LENGTH):
        return value
    if isinstance(value, str) and len(value) == Z85_KEY_LENGTH and not os.path.isfile(value):
        return value.encode()
    if isinstance(value, (str, os.PathLike)) and os.path.isfile(value):
        import zmq.auth

        try:
            public, _ = zmq.auth.load_certificate(os.fspath(value))
        except (OSError, ValueError) as err:
            raise OptionError(f"cannot read a public key from {os.fspath(value)}: {err}") from None
        return public
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    raise OptionError(f"expected the judge's public key (40 characters of z85, as serve prints it) or a certificate "
                      f"file, got {shown}")


def curve_key(value: Any) -> bytes | None:
    """A CURVE secret key given as the key itself (40 z85 characters) or as a certificate file's path."""
    if value is None or (isinstance(value, bytes) and len(value) == 40):
        return value
    return read_curve_secret_key(os.fspath(value))


def for_judge(kind: str, options: dict[str, Any]) -> dict[str, Any]:
    """The options a judge of ``kind`` ("single" or "multi") takes; unknown names are a TypeError."""
    unknown = sorted(set(options) - set(BY_NAME))
    if unknown:
        raise TypeError(f"unknown judge option(s): {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    return {k: v for k, v in options.items() if BY_NAME[k].judges in ("all", kind)}
