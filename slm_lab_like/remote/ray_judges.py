"""Judges as Ray actors (`remote: "ray"`): spread over the run's Ray cluster, each bound to its own node's address.

An actor hosts one single-agent judge in a thread of its process (`remote/hosting.py: serve`), so the judge's env
steps on that node with the actor's `resources`. When any node's address is not loopback (or `curve` says so), the
judges encrypt their traffic with a CURVE key pair made for this run, whose secret half travels to the actors
through Ray (inside the cluster the user started) and never touches a file. A judge lost with its node is replaced
by a new actor wherever Ray finds room; every actor is killed when the env closes.
"""
from __future__ import annotations

import logging
import os
from typing import Any

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # a private Ray on 127.0.0.1 (see ray_backend)

import ray  # noqa: E402
import zmq  # noqa: E402
from ray.exceptions import GetTimeoutError, RayError  # noqa: E402

from slm_lab_like.remote.hosting import LOOPBACK_HOSTS  # noqa: E402

log = logging.getLogger("slm_lab_like")
START_TIMEOUT = 120.0  # seconds a judge actor may take to be placed and to bind (a fresh node imports torch)


@ray.remote(max_restarts=0)
class JudgeActor:
    """One judge of env `name`, bound to this node's address (loopback stays loopback)."""

    def __init__(self, name: str, kwargs: dict[str, Any], curve_secret_key: bytes | None, max_sessions: int) -> None:
        from slm_lab_like.remote.hosting import serve

        host = ray.util.get_node_ip_address()
        options: dict[str, Any] = {"max_sessions": max_sessions}
        if curve_secret_key is not None:
            options["curve_secret_key"] = curve_secret_key
        self.address = serve(name, f"tcp://{host}:0", env_kwargs=kwargs, allow_remote=host not in LOOPBACK_HOSTS,
                             **options)
        self.node = ray.get_runtime_context().get_node_id()

    def where(self) -> tuple[str, str]:
        """(address, node id)."""
        return self.address, self.node


class RayJudges:
    """`count` judge actors of env `name` on the Ray cluster this process is connected to (a JudgeSet)."""

    def __init__(self, name: str, kwargs: dict[str, Any], count: int, cpu: float = 1.0, gpu: float = 0.0,
                 curve: bool | None = None, max_sessions: int = 64) -> None:
        if not ray.is_initialized():
            raise RuntimeError('judges on Ray need the session on Ray: set meta.ray.address ("local" for a private '
                               "Ray of this machine)")
        self.name, self.kwargs, self.count = name, kwargs, count
        self.options = {"num_cpus": cpu, "num_gpus": gpu, "scheduling_strategy": "SPREAD"}
        self.max_sessions = max_sessions
        if curve is None:
            curve = any(n["Alive"] and n["NodeManagerAddress"] not in LOOPBACK_HOSTS for n in ray.nodes())
        public, secret = zmq.curve_keypair() if curve else (None, None)
        self.curve_public_key: bytes | None = public
        self._secret = secret
        self.actors: list[Any] = [None] * count
        self.addresses: list[str] = [""] * count
        self.nodes: list[str] = [""] * count
        launched: list[Any] = []
        try:
            launched = [self._launch() for _ in range(count)]  # placed and started at once, then waited for
            for j, actor in enumerate(launched):
                self._take(j, actor)
        except BaseException:
            for actor in launched:
                _kill(actor)
            raise

    def _launch(self) -> Any:
        return JudgeActor.options(**self.options).remote(  # type: ignore[attr-defined]
            self.name, self.kwargs, self._secret, self.max_sessions)

    def _take(self, j: int, actor: Any) -> None:
        """Wait for a launched actor's judge to bind; it becomes judge j. RuntimeError in one line if it cannot."""
        self.actors[j] = actor
        try:
            self.addresses[j], self.nodes[j] = ray.get(actor.where.remote(), timeout=START_TIMEOUT)
        except GetTimeoutError:
            raise RuntimeError(f'a judge of "{self.name}" was not placed on Ray within {START_TIMEOUT:g} s (does the '
                               f"cluster have {self.options['num_cpus']:g} CPU(s) free for it? remote.resources)"
                               ) from None
        except RayError as err:
            lines = [ln for ln in str(err).strip().splitlines() if ln and not ln[0].isspace()]
            raise RuntimeError(f'a judge of "{self.name}" could not start on Ray: {lines[-1] if lines else err!r}'
                               ) from None
        log.debug('judge %d of "%s" at %s on node %s', j, self.name, self.addresses[j], self.nodes[j])

    def address(self, j: int) -> str:
        return self.addresses[j]

    def replace(self, j: int) -> str:
        """Kill judge j's actor (its node may be gone already) and start another wherever Ray finds room."""
        _kill(self.actors[j])
        self.actors[j] = None
        self._take(j, self._launch())
        return self.addresses[j]

    def close(self) -> None:
        for j, actor in enumerate(self.actors):
            _kill(actor)
            self.actors[j] = None


def _kill(actor: Any) -> None:
    """Kill a judge actor, whose node may be gone already."""
    if actor is None:
        return
    try:
        ray.kill(actor, no_restart=True)
    except RayError:  # its node is gone, or Ray is shutting down
        pass
