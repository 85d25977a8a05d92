"""Edges of the wire protocol that PROTOCOL.md's notes for implementers once listed as accidents, now refused as
protocol errors: a version that is 1 only by Python's equality, dtype strings numpy cannot read, and a vector reset
whose seeds would pass int64 for the last copies."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from slm_lab_like.remote import protocol as P
from slm_lab_like.remote.compliance import Probe
from slm_lab_like.remote.hosting import serve, shutdown


@pytest.fixture
def judge():
    address = serve("CartPole-v1")
    yield address
    shutdown(address)


@pytest.mark.parametrize("version", [1.0, True, "1", [1]])
def test_a_version_that_only_equals_1_in_python_is_refused(judge: str, version: object) -> None:
    probe = Probe(judge, None, 5.0)
    try:
        reply = probe.send(P.encode({"t": "hello", "v": version, "s": 3}))
        assert reply["t"] == "error" and reply["code"] == "bad_version" and reply["s"] == 3
        assert probe.hello()["t"] == "welcome"  # the integer 1 still gets in
    finally:
        probe.close()


def test_every_dtype_string_the_protocol_takes_is_one_numpy_reads() -> None:
    taken = 0
    for order, kind, size in itertools.product(["", "<", ">", "|", "="], "biufcSUV", ["1", "2", "4", "8", "16"]):
        name = order + kind + size
        try:
            dtype = P.check_dtype(name)
        except P.ProtocolError as err:
            assert err.code == "malformed"
            continue
        assert dtype == np.dtype(name) and dtype.kind in "biufc"
        taken += 1
    assert taken >= 40
    for refused in ("f1", "b2", "b8", "<f1"):
        with pytest.raises(P.ProtocolError, match="unsupported dtype"):
            P.check_dtype(refused)


def test_a_vector_reset_whose_last_seed_would_pass_int64_is_malformed(judge: str) -> None:
    probe = Probe(judge, None, 5.0)
    try:
        probe.hello(n=4)
        reply = probe.call({"t": "vreset", "seed": P.MAX_SEED - 2})
        assert reply["t"] == "error" and reply["code"] == "malformed" and "copy index" in reply["msg"]
        assert probe.call({"t": "vreset", "seed": P.MAX_SEED - 3})["t"] == "vreset"  # the last copy gets MAX_SEED
    finally:
        probe.close()
