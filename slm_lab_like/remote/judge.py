"""Judge command line (start subprocess judges from Python with ``spawn.spawn_judge``).

``python -m slm_lab_like.remote.judge --env CartPole-v1 --bind tcp://127.0.0.1:0`` serves until SIGTERM
or SIGINT and first prints one JSON line on stdout: ``{"address", "kind", "env", "pid", "tokens"}``
(``tokens`` maps body names to tokens for a multi-agent judge; single-agent judges issue tokens in the
handshake; ``curve_public_key`` is there when traffic is encrypted). ``--env`` takes every name a spec env
entry takes (gymnasium ids, built-in games such as ``connect_four`` and ``tag_arena``, ``module:Class``,
PettingZoo ``module:env`` / ``module:parallel_env``), and the env's kind picks the judge. The judge options
are those of ``run_lab.py serve`` and ``serve(...)``. A judge that cannot start says why in one line on
stderr and exits with code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Any

from slm_lab_like.remote.hosting import hosting_for, judge_info
from slm_lab_like.remote.options import OptionError, add_judge_options, for_judge, judge_options

EPILOG = """\
env names: gymnasium ids (CartPole-v1); the built-in envs {builtin};
module:Class of a gymnasium or PettingZoo env; PettingZoo factories (pettingzoo.classic.tictactoe_v3:env).
CURVE: make a key pair with  python -c "import zmq.auth; zmq.auth.create_certificates('.', 'judge')"  and
start the judge with --curve-secret-key judge.key_secret; clients pass the public key (judge.key, or the
curve_public_key of the start-up line) as RemoteEnv(..., curve_server_key=...)."""


def build_parser() -> argparse.ArgumentParser:
    """Return the judge command-line parser."""
    from slm_lab_like.envs.make import MULTIAGENT

    builtin = ", ".join(sorted(MULTIAGENT))
    ap = argparse.ArgumentParser(prog="python -m slm_lab_like.remote.judge", description=__doc__.split("\n")[0],
                                 epilog=EPILOG.format(builtin=builtin),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", required=True, help="env name (see below)")
    ap.add_argument("--bind", default="tcp://127.0.0.1:0", help="ZeroMQ endpoint (loopback by default)")
    ap.add_argument("--allow-remote", action="store_true", help="allow binding to non-loopback interfaces")
    ap.add_argument("--multi", action="store_true", help="insist on a multi-agent env (the env's kind decides)")
    ap.add_argument("--api", choices=("aec", "parallel"), default=None,
                    help="multi-agent: the env's PettingZoo API (default: the env's own)")
    ap.add_argument("--kwargs", default="{}", help="JSON object of env constructor keyword arguments")
    add_judge_options(ap)
    return ap


def make_judge(args: argparse.Namespace) -> Any:
    """Build the judge described by parsed command-line arguments (errors in one line)."""
    try:
        kwargs = json.loads(args.kwargs)
    except json.JSONDecodeError as err:
        raise OptionError(f"--kwargs: not JSON: {err}") from None
    if not isinstance(kwargs, dict):
        raise OptionError("--kwargs must be a JSON object")
    plan = hosting_for(args.env, kwargs)
    if args.multi and plan.api == "single":
        raise OptionError(f'--multi: "{args.env}" is a single-agent env')
    options = judge_options(args)
    base = {"env_id": args.env, "allow_remote": args.allow_remote}
    if plan.api == "single":
        from slm_lab_like.remote.server import JudgeServer
        return JudgeServer(plan.make, args.bind, **base, **for_judge("single", options))
    from slm_lab_like.remote.multi_server import MultiJudgeServer
    return MultiJudgeServer(plan.make, args.bind, api=args.api or plan.api, **base, **for_judge("multi", options))


def one_line(err: BaseException) -> str:
    """An exception as one line: its message (with its type when that says more), whitespace collapsed."""
    message = getattr(err, "message", None) or str(err)
    if not isinstance(err, (OptionError, ValueError, OSError)) or not message:
        message = f"{type(err).__name__}: {message}"
    return " ".join(message.split())


def main(argv: list[str] | None = None) -> None:
    """Start a judge, print its address (and tokens) as one JSON line, serve until SIGTERM/SIGINT."""
    args = build_parser().parse_args(argv)
    try:
        judge = make_judge(args)
    except Exception as err:  # a judge that cannot start says why, in one line, whatever the cause
        print(f"error: judge for {args.env} cannot start: {one_line(err)}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: judge._stop.set())
    print(json.dumps({**judge_info(judge), "pid": os.getpid()}), flush=True)
    judge.run()


if __name__ == "__main__":
    main()
