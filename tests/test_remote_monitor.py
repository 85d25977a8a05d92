"""A client's connection events never stop ZeroMQ: libzmq sends them from its I/O thread with a blocking send, so a
bounded queue that fills (pyzmq's get_monitor_socket: 1000 events), or a monitor closed while its socket still
sends (a client dropped without close, collected monitor first), stops every socket of the process — what made
every remote test of one pytest worker fail with "no connection for 3 s" in one CI run of three."""
from __future__ import annotations

import gc
import time

import zmq

from slm_lab_like.remote.client import close_monitor, monitor_socket


def round_trip(ctx: zmq.Context) -> bool:
    """Whether a message crosses a new TCP connection in `ctx` within 5 s (its I/O thread still moves messages)."""
    server, client = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    client.setsockopt(zmq.LINGER, 0)
    client.connect(f"tcp://127.0.0.1:{server.bind_to_random_port('tcp://127.0.0.1')}")
    client.send(b"ping")
    crossed = bool(server.poll(5000))
    server.close(0)
    client.close(0)
    return crossed


def test_connection_events_nobody_reads_leave_the_process_sockets_working() -> None:
    ctx = zmq.Context()  # its own I/O thread: were it stopped, no other test would be
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RECONNECT_IVL, 1)
    sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1)
    monitor = monitor_socket(sock, zmq.EVENT_CONNECT_RETRIED | zmq.EVENT_CONNECT_DELAYED | zmq.EVENT_CLOSED)
    sock.connect("tcp://127.0.0.1:1")  # refused: events every millisecond, none read
    time.sleep(2.0)
    assert round_trip(ctx), "the context's I/O thread stopped"
    queued = 0
    while monitor.poll(0):
        monitor.recv_multipart()
        queued += 1
    assert queued > 1000  # more than a bounded queue would have taken
    close_monitor(sock, monitor)
    sock.close(0)
    ctx.term()


def test_a_monitor_dropped_before_the_socket_it_watches_leaves_the_process_sockets_working() -> None:
    ctx = zmq.Context()  # its own I/O thread, as above
    judge = ctx.socket(zmq.ROUTER)
    port = judge.bind_to_random_port("tcp://127.0.0.1")
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    monitor = monitor_socket(sock, zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
    sock.connect(f"tcp://127.0.0.1:{port}")
    assert monitor.poll(5000)  # connected
    del monitor  # a client dropped without close: the collector may take its monitor first
    gc.collect()
    judge.close(0)  # the judge goes: a disconnect event for the dropped client's monitor
    time.sleep(0.3)
    assert round_trip(ctx), "the context's I/O thread stopped"
    sock.disable_monitor()
    sock.close(0)
