"""Judge addresses: a tcp address's host and port, and whether it is loopback."""
from __future__ import annotations

import ipaddress


def tcp_host_port(address: str) -> tuple[str, str] | None:
    """The host and port of a ``tcp://HOST:PORT`` endpoint as written, or None when it is not tcp or has no port."""
    if not address.startswith("tcp://"):
        return None
    host, sep, port = address[len("tcp://"):].rpartition(":")
    return (host, port) if sep else None


def is_loopback(address: str) -> bool:
    """Tell whether a ZeroMQ endpoint only listens locally (loopback TCP, ipc or inproc)."""
    if address.startswith(("ipc://", "inproc://")):
        return True
    if not address.startswith("tcp://"):
        return False
    split = tcp_host_port(address)
    host = (address[len("tcp://"):] if split is None else split[0]).strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
