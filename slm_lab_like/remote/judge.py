"""Judge command line (start subprocess judges from Python with ``spawn.spawn_judge``).

``python -m slm_lab_like.remote.judge --env CartPole-v1 --bind tcp://127.0.0.1:0`` serves until SIGTERM
or SIGINT and first prints one JSON line on stdout: ``{"address", "kind", "env", "pid", "tokens"}``
(``tokens`` maps body names to tokens for a ``--multi`` judge; single-agent judges issue tokens in the
handshake). The shared secret is read from an environment variable, never from the command line.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from typing import Any

from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.spawn import SECRET_ENV_VAR


def build_parser() -> argparse.ArgumentParser:
    """Return the judge command-line parser."""
    ap = argparse.ArgumentParser(prog="python -m slm_lab_like.remote.judge", description=__doc__.split("\n")[0])
    ap.add_argument("--env", required=True, help="gymnasium id, module:Class or module:factory")
    ap.add_argument("--bind", default="tcp://127.0.0.1:0", help="ZeroMQ endpoint (loopback by default)")
    ap.add_argument("--allow-remote", action="store_true", help="allow binding to non-loopback interfaces")
    ap.add_argument("--multi", action="store_true", help="host a PettingZoo multi-agent env")
    ap.add_argument("--api", choices=("aec", "parallel"), default=None,
                    help="multi: the env's PettingZoo API (default: read from the env's class)")
    ap.add_argument("--kwargs", default="{}", help="JSON object of env constructor keyword arguments")
    ap.add_argument("--secret-env", default=None, help=f"name of the env variable holding a shared secret "
                                                         f"(spawn_judge uses {SECRET_ENV_VAR})")
    ap.add_argument("--max-sessions", type=int, default=64)
    ap.add_argument("--session-timeout", type=float, default=600.0)
    ap.add_argument("--client-timeout", type=float, default=10.0)
    ap.add_argument("--join-timeout", type=float, default=None)
    ap.add_argument("--on-timeout", choices=("null", "done"), default="null")
    ap.add_argument("--no-claim", action="store_true", help="multi: only admit clients holding issued tokens")
    ap.add_argument("--max-message-bytes", type=int, default=P.DEFAULT_MAX_MESSAGE_BYTES)
    return ap


def make_judge(args: argparse.Namespace) -> Any:
    """Build the judge described by parsed command-line arguments."""
    kwargs = json.loads(args.kwargs)
    if not isinstance(kwargs, dict):
        raise SystemExit("--kwargs must be a JSON object")
    secret = os.environ.get(args.secret_env) if args.secret_env else None
    base = dict(secret=secret, allow_remote=args.allow_remote, max_message_bytes=args.max_message_bytes)
    if args.multi:
        from slm_lab_like.remote.multi_server import MultiJudgeServer
        return MultiJudgeServer(args.env, args.bind, api=args.api, env_kwargs=kwargs,
                                client_timeout=args.client_timeout,
                                join_timeout=args.join_timeout, on_timeout=args.on_timeout,
                                allow_claim=not args.no_claim, **base)
    from slm_lab_like.remote.server import JudgeServer
    return JudgeServer(args.env, args.bind, env_kwargs=kwargs, max_sessions=args.max_sessions,
                       session_timeout=args.session_timeout, **base)


def main(argv: list[str] | None = None) -> None:
    """Start a judge, print its address (and tokens) as one JSON line, serve until SIGTERM/SIGINT."""
    args = build_parser().parse_args(argv)
    judge = make_judge(args)
    info = {"address": judge.address, "kind": judge.kind, "env": str(judge.env_id), "pid": os.getpid(),
            "tokens": getattr(judge, "tokens", None)}
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: judge._stop.set())
    print(json.dumps(info), flush=True)
    judge.run()


if __name__ == "__main__":
    main()
