"""Judges in this process: :func:`serve` hosts one env (single- or multi-agent) in a background thread,
:func:`serve_spec` hosts every env of a spec (``run_lab.py serve``); :func:`judge_for` and :func:`shutdown`
find and stop them. Both take the judge options of :mod:`~slm_lab_like.remote.options` by name, and env names
as the env registry knows them (:func:`hosting_for`).
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Sequence, TextIO

import zmq

from slm_lab_like.remote.base import BaseJudge
from slm_lab_like.remote.multi_server import MultiJudgeServer
from slm_lab_like.remote.names import hosting_for
from slm_lab_like.remote.options import BY_NAME, for_judge
from slm_lab_like.remote.server import JudgeServer

__all__ = ["HostingError", "serve", "serve_spec", "judge_for", "shutdown", "plan_hosting", "hosting_for", "judge_info"]

logger = logging.getLogger(__name__)

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")

_SERVED: dict[str, BaseJudge] = {}


def serve(env: Any, address: str = "tcp://127.0.0.1:0", *, multi: bool = False, env_kwargs: dict | None = None,
          **kwargs: Any) -> str:
    """Host ``env`` behind a judge in a background thread of this process; return its address.

    ``env`` is an env name (any the env registry knows; its kind picks the judge, so ``serve("tag_arena")`` hosts
    a multi-agent judge) or a factory; ``multi=True`` hosts a factory's PettingZoo env with
    :class:`MultiJudgeServer` (pass ``api="aec"|"parallel"`` or let it read the env's kind; its tokens are in
    ``judge_for(address).tokens``). Judge options (:mod:`~slm_lab_like.remote.options`) that do not apply to the
    judge's kind are left out, so one set of options serves every env. Stop it with :func:`shutdown`.
    """
    if isinstance(env, str):
        plan = hosting_for(env, env_kwargs)
        if multi and plan.api == "single":
            raise ValueError(f'"{env}" is a single-agent env; serve it without multi')
        kwargs.setdefault("env_id", env)
        if plan.api != "single":
            kwargs.setdefault("api", plan.api)
        env, env_kwargs, multi = plan.make, None, plan.api != "single"
    options = {k: kwargs.pop(k) for k in list(kwargs) if k in BY_NAME}
    cls = MultiJudgeServer if multi else JudgeServer
    server: BaseJudge = cls(env, address, env_kwargs=env_kwargs, **kwargs, **for_judge(cls.kind, options))
    bound = server.start()
    _SERVED[bound] = server
    return bound


def judge_info(judge: BaseJudge) -> dict[str, Any]:
    """What a judge's host prints for its clients: address, kind, env, tokens of a multi-agent judge's bodies
    and the public CURVE key when traffic is encrypted."""
    info = {"address": judge.address, "kind": judge.kind, "env": str(getattr(judge, "env_id", "")),
            "tokens": getattr(judge, "tokens", None)}
    if judge.curve_public_key is not None:
        info["curve_public_key"] = judge.curve_public_key
    return info


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
    """How each env entry of a spec is hosted (an ``slm_lab_like.envs.adapter.Hosting``: factory and API), asked of the
    entry's env adapter; EntryError at ``env[j].<key>`` for an entry that cannot be served."""
    from slm_lab_like.envs.adapter import EntryError
    from slm_lab_like.envs.registry import adapter_for

    plans = []
    for j, entry in enumerate(entries):
        try:
            plans.append(adapter_for(entry).host())
        except EntryError as err:
            raise EntryError(f"env[{j}].{err.key}" if err.key else f"env[{j}]", err.message) from None
    return plans


class HostingError(RuntimeError):
    """An env of a spec that could not be hosted where asked (one line: the entry, the address, why)."""


def serve_spec(spec: Any, host: str = "127.0.0.1", port: int = 0, stop: threading.Event | None = None,
               out: TextIO | None = None, **options: Any) -> None:
    """Host every env of a validated spec behind its own judge until ``stop`` is set.

    Env j binds ``tcp://HOST:PORT+j`` (a free port when ``port`` is 0); one JSON line per env goes to ``out``
    (stdout by default): ``{"env", "index", "address", "kind", "tokens"}`` (the tokens of a multi-agent env's
    bodies; ``curve_public_key`` too when traffic is encrypted). ``options`` are judge options
    (:mod:`~slm_lab_like.remote.options`), each given to the judges it applies to. An entry that cannot be
    served (a lab-native batch env, a remote one) is an EntryError before any judge starts.
    """
    plans = plan_hosting(spec.env)
    for_judge("single", options)  # unknown option names fail before any judge starts
    stop = stop or threading.Event()
    addresses: list[str] = []
    try:
        for j, (env, plan) in enumerate(zip(spec.env, plans)):
            multi = plan.api != "single"
            extra = {"api": plan.api} if multi else {}
            bind = f"tcp://{host}:{port + j if port else 0}"
            try:
                address = serve(plan.make, bind, multi=multi, env_id=env.name,
                                allow_remote=host not in LOOPBACK_HOSTS, **extra, **options)
            except (ValueError, zmq.ZMQError) as err:  # a port in use, a host that is not this machine's, ...
                raise HostingError(f'env[{j}] "{env.name}": cannot listen at {bind}: {err}') from None
            addresses.append(address)
            line = {"env": env.name, "index": j, **judge_info(judge_for(address))}
            print(json.dumps(line), file=out, flush=True)
            logger.info("serving %s (%s) at %s", env.name, plan.api, address)
        stop.wait()
    finally:
        for address in addresses:
            shutdown(address)
