"""The requests' fields are declared once (protocol.REQUESTS): docs/PROTOCOL.md's tables list exactly those fields
with those types, and a judge refuses a request whose declared field is missing or of another type with the
field's own error code, naming the field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import zmq

from slm_lab_like.remote import JudgeServer, MultiJudgeServer
from slm_lab_like.remote import protocol as P

DOC = (Path(__file__).resolve().parent.parent / "docs" / "PROTOCOL.md").read_text()
ROW = re.compile(r"^\| ((?:`[\w]+`(?:, )?)+) \|([^|]*)\|")


def table_after(marker: str) -> dict[str, str]:
    """Field -> type of the first table after ``marker`` in PROTOCOL.md (a row naming several fields with no
    type: those fields as another request has them)."""
    lines = DOC[DOC.index(marker):].splitlines()[1:]
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    fields: dict[str, str] = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        found = ROW.match(line)
        assert found, line
        for key in re.findall(r"`(\w+)`", found.group(1)):
            fields[key] = found.group(2).strip()
    return fields


def prose_fields(kind: str) -> dict[str, str]:
    """The fields of a request written in prose, ``Request `{"t": "render", "k": token, "s": int}```."""
    found = re.search(r'Request `\{"t": "' + kind + r'"((?:, "\w+": \w+)*)\}`', DOC)
    assert found, kind
    return {"t": "str", **{k: "" for k in re.findall(r'"(\w+)":', found.group(1))}}


def documented(kind: str) -> dict[str, str]:
    if kind in ("hello", "reset", "step"):
        return table_after(f"### 5.{['hello', 'reset', 'step'].index(kind) + 1} `{kind}`")
    if kind in ("vreset", "vstep"):
        fields = table_after(f"**`{kind}` request**")
        like = documented(kind[1:])
        return {k: (t or like[k]) for k, t in fields.items()}
    if kind == "ping":
        return table_after("### 5.5 `ping`")
    return prose_fields(kind)


@pytest.mark.parametrize("kind", sorted(P.REQUESTS))
def test_protocol_md_lists_each_requests_declared_fields_and_types(kind: str) -> None:
    fields = documented(kind)
    declared = {f.key: f.type_name for f in P.REQUESTS[kind]}
    assert set(fields) == set(declared), (kind, fields, declared)
    for key, written in fields.items():
        assert written in ("", declared[key]), (kind, key, written, declared[key])


def wrong_value(field: P.Field) -> object:
    """A value of none of the field's types."""
    return next(v for v in ("x", 1.5, [1], {"a": 1}, True) if type(v) not in field.types)


def requests_breaking_a_field(token: str) -> list[tuple[str, str, dict, str]]:
    """(kind, field, request, expected code) for every field the declaration holds to its types."""
    valid = {"hello": {"v": P.PROTOCOL_VERSION, "s": 0, "k": token}, "reset": {"k": token, "s": 10**6},
             "step": {"k": token, "s": 10**6, "a": 0}, "vreset": {"k": token, "s": 10**6},
             "vstep": {"k": token, "s": 10**6, "a": [0]}, "ping": {"k": token}, "render": {"k": token},
             "close": {"k": token}}
    cases = []
    for kind, fields in P.REQUESTS.items():
        for field in fields:
            if field.code is None or field.key == "t":
                continue
            if field.types:
                cases.append((kind, field.key, {"t": kind, **valid[kind], field.key: wrong_value(field)}, field.code))
            if field.required:
                request = {"t": kind, **valid[kind]}
                request.pop(field.key, None)
                cases.append((kind, field.key, request, field.code))
    return cases


@pytest.mark.parametrize("judge_kind", ["single", "multi"])
def test_a_judge_refuses_a_broken_declared_field_with_its_code_naming_it(judge_kind: str) -> None:
    judge = JudgeServer("CartPole-v1") if judge_kind == "single" else MultiJudgeServer("connect_four")
    address = judge.start()
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 5000)
    sock.connect(address)
    try:
        token = next(iter(judge.tokens.values())) if judge_kind == "multi" else None
        if token is None:
            sock.send_multipart(P.encode({"t": "hello", "v": P.PROTOCOL_VERSION, "s": 0}))
            token = P.decode(sock.recv_multipart())["k"]
        cases = requests_breaking_a_field(token)
        assert {(k, f) for k, f, _, _ in cases} >= {("step", "a"), ("reset", "s"), ("reset", "opt"), ("hello", "v"),
                                                     ("ping", "k"), ("vreset", "seed")}
        for kind, key, request, code in cases:
            sock.send_multipart(P.encode(request))
            reply = P.decode(sock.recv_multipart())
            assert (reply["t"], reply["code"]) == ("error", code), (kind, key, request, reply)
            assert f"'{key}'" in reply["msg"], reply
        assert judge._thread is not None and judge._thread.is_alive()
    finally:
        sock.close(0)
        judge.stop()
