"""Judges in this process: :func:`serve` hosts one env (single- or multi-agent) in a background thread,
:func:`serve_spec` hosts every env of a spec (``run_lab.py serve``); :func:`judge_for` and :func:`shutdown`
find and stop them.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Sequence, TextIO

from slm_lab_like.remote.base import BaseJudge
from slm_lab_like.remote.multi_server import MultiJudgeServer
from slm_lab_like.remote.server import JudgeServer

logger = logging.getLogger(__name__)

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")

_SERVED: dict[str, BaseJudge] = {}


def serve(env_factory: Any, address: str = "tcp://127.0.0.1:0", *, multi: bool = False, **kwargs: Any) -> str:
    """Host ``env_factory`` behind a judge in a background thread of this process; return its address.

    ``multi=True`` hosts a PettingZoo env with :class:`MultiJudgeServer` (pass ``api="aec"|"parallel"`` or let
    it read the env's kind; its tokens are in ``judge_for(address).tokens``). Stop it with :func:`shutdown`.
    """
    server: BaseJudge = (MultiJudgeServer if multi else JudgeServer)(env_factory, address, **kwargs)
    bound = server.start()
    _SERVED[bound] = server
    return bound


def judge_for(address: str) -> BaseJudge:
    """Return the in-process judge started by :func:`serve` at ``address``."""
    return _SERVED[address]


def shutdown(address: str | None = None) -> None:
    """Stop the in-process judge at ``address`` (or every judge started by :func:`serve`)."""
    for addr in [address] if address is not None else list(_SERVED):
        server = _SERVED.pop(addr, None)
        if server is not None:
            server.stop()


def plan_hosting(entries: Sequence[Any]) -> list[Any]:
    """How each env entry of a spec is hosted (an ``envs.adapter.Hosting``: factory and API), asked of the
    entry's env adapter; EntryError at ``env[j].<key>`` for an entry that cannot be served."""
    from envs.adapter import EntryError
    from envs.registry import adapter_for

    plans = []
    for j, entry in enumerate(entries):
        try:
            plans.append(adapter_for(entry).host())
        except EntryError as err:
            raise EntryError(f"env[{j}].{err.key}" if err.key else f"env[{j}]", err.message) from None
    return plans


def serve_spec(spec: Any, host: str = "127.0.0.1", port: int = 0, stop: threading.Event | None = None,
               out: TextIO | None = None, **multi_options: Any) -> None:
    """Host every env of a validated spec behind its own judge until ``stop`` is set.

    Env j binds ``tcp://HOST:PORT+j`` (a free port when ``port`` is 0); one JSON line per env goes to ``out``
    (stdout by default): ``{"env", "index", "address", "tokens"}``, the tokens of a multi-agent env's bodies.
    ``multi_options`` go to every multi-agent judge (``client_timeout``, ``on_timeout``, ...). An entry that
    cannot be served (a lab-native batch env, a remote one) is an EntryError before any judge starts.
    """
    plans = plan_hosting(spec.env)
    stop = stop or threading.Event()
    addresses: list[str] = []
    try:
        for j, (env, plan) in enumerate(zip(spec.env, plans)):
            multi = plan.api != "single"
            options = {"api": plan.api, **multi_options} if multi else {}
            address = serve(plan.make, f"tcp://{host}:{port + j if port else 0}", multi=multi,
                            allow_remote=host not in LOOPBACK_HOSTS, **options)
            addresses.append(address)
            tokens = getattr(judge_for(address), "tokens", None)
            print(json.dumps({"env": env.name, "index": j, "address": address, "tokens": tokens}),
                  file=out, flush=True)
            logger.info("serving %s (%s) at %s", env.name, plan.api, address)
        stop.wait()
    finally:
        for address in addresses:
            shutdown(address)
