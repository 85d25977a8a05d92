"""Whether Ray could run a spec's sessions at all, told before anything starts: Ray installed, the sessions'
resources within a private Ray's, a cluster address that answers as Ray (Ray itself retries a wrong one for minutes)."""
from __future__ import annotations

import importlib.util
import os
import socket
from typing import Sequence

from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.schema import RaySpec, RemoteSpec, ResourceSpec, Spec

Ask = tuple[str, str, ResourceSpec]  # (spec key, who asks, what it asks for)

PROBE_SECONDS = 3.0  # how long a Ray cluster's address may take to accept a connection before the run is refused


def check_ray(spec: RaySpec, address_key: str = "meta.ray.address", judges: Sequence[Ask] = ()) -> None:
    """SpecError when Ray could never start a session or a judge (it would wait for it forever): Ray not installed,
    a session or a judge (`judges`: see judge_asks) asking a private local Ray for more CPUs than it has or more GPUs
    than torch sees, or a cluster address that does not answer within PROBE_SECONDS (`address_key` names where the
    address came from)."""
    if importlib.util.find_spec("ray") is None:
        raise SpecError(address_key, 'Ray is not installed; pip install "slm_lab_like[ray]"')
    if spec.address not in (None, "local"):
        probe_address(spec.address, address_key)
        return
    cpus = spec.num_cpus or os.cpu_count() or 1
    for key, who, need in all_asks(spec, judges):
        if need.cpu > cpus:
            where = "meta.ray.num_cpus" if spec.num_cpus else "this machine's CPUs"
            raise SpecError(f"{key}.cpu", f"{who} asks for {need.cpu:g} CPUs and the private local Ray has {cpus} "
                                          f"({where}): it could never start")
        if need.gpu > 0:
            gpus = _gpu_count()
            if need.gpu > gpus:
                raise SpecError(f"{key}.gpu", f"{who} asks for {need.gpu:g} GPU(s) and torch sees {gpus} on this "
                                              "machine: it could never start")


def all_asks(spec: RaySpec, judges: Sequence[Ask]) -> list[Ask]:
    """What a session asks of Ray (meta.ray.resources_per_session), then what each judge asks (judge_asks)."""
    return [("meta.ray.resources_per_session", "a session", spec.resources_per_session), *judges]


def judge_asks(spec: Spec) -> list[Ask]:
    """(key, who, resources) of every env entry's judges placed on Ray."""
    return [(f"env[{j}].remote.resources", f"a judge of env[{j}]", e.remote.resources or ResourceSpec())
            for j, e in enumerate(spec.env) if isinstance(e.remote, RemoteSpec) and e.remote.address == "ray"]


def _gpu_count() -> int:
    """The CUDA GPUs torch sees here."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def probe_address(address: str, key: str = "meta.ray.address") -> None:
    """SpecError at `key` unless a Ray address ("HOST:PORT", "ray://HOST:PORT") answers as a gRPC server (Ray's GCS
    and client server are) within PROBE_SECONDS: Ray itself retries a dead or wrong address for minutes. "auto" and
    "local" are left to Ray, which fails at once without a cluster."""
    if address in ("auto", "local"):
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SpecError(key, f'expected "auto", "HOST:PORT" or "ray://HOST:PORT", got "{address}"')
    try:
        conn = socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_SECONDS)
    except OSError as err:
        reason = "timed out" if isinstance(err, TimeoutError) else (err.strerror or str(err))
        raise SpecError(key, f'no Ray cluster answers at "{address}" ({reason}); start one (ray start --head) or fix '
                             "the address") from None
    with conn:
        if os.environ.get("RAY_USE_TLS", "0") not in ("0", "") or _speaks_http2(conn):
            return
    raise SpecError(key, f'"{address}" answers, but not as a Ray cluster (no gRPC server there); give the head '
                         "node's GCS port (ray start --port, default 6379) or its client port (ray://HOST:10001)")


def _speaks_http2(conn: socket.socket) -> bool:
    """Whether the server at `conn` answers an HTTP/2 client preface with its SETTINGS frame, as gRPC servers do."""
    try:
        return _settings_frame(conn)
    except OSError:  # reset, or silent past PROBE_SECONDS
        return False


def _settings_frame(conn: socket.socket) -> bool:
    """Send an HTTP/2 client preface; whether the first frame back is a SETTINGS frame."""
    conn.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))  # preface, empty SETTINGS
    head = b""
    while len(head) < 9:
        chunk = conn.recv(9 - len(head))
        if not chunk:
            return False
        head += chunk
    return head[3] == 4  # a frame header: length (3 bytes), type (4: SETTINGS), flags, stream id
