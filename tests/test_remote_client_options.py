"""A spec's remote entry carries the client's side of the judge's options: a shared secret by the name of its
environment variable, the judge's public CURVE key (z85 text or a certificate file), timeouts; every mistake is a
one-line error at its key, found by `check` before a session starts."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import zmq
import zmq.auth

from slm_lab_like.experiment.session import Session
from slm_lab_like.remote import serve, shutdown
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.load import load, validate
from slm_lab_like.spec.schema import RemoteSpec
from tests.conftest import random_spec

SECRET_VAR = "SLM_TEST_JUDGE_SECRET"


@pytest.fixture(scope="module")
def judge():
    """A CartPole judge that wants a shared secret and encrypts with CURVE; yields (address, public key)."""
    public, secret = zmq.curve_keypair()
    address = serve("CartPole-v1", secret="open sesame", curve_secret_key=secret)
    yield address, public.decode()
    shutdown(address)


def remote_spec(remote: object) -> dict:
    raw = random_spec(num=3, max_frame=300)
    raw["env"][0].update(remote=remote)
    return raw


def test_a_session_plays_through_a_secret_curve_judge(judge, monkeypatch: pytest.MonkeyPatch) -> None:
    address, public = judge
    monkeypatch.setenv(SECRET_VAR, "open sesame")
    spec = validate(remote_spec({"address": address, "secret_env": SECRET_VAR, "curve_server_key": public,
                                 "timeout": 10}), "t")
    assert spec.env[0].remote == RemoteSpec(address, SECRET_VAR, public, 10.0)
    result = Session(spec, seed=2).run()
    assert result.env_frames == [300] and sum(len(m.rows) for m in result.metrics.values()) > 3


def test_the_curve_key_may_be_a_certificate_file(judge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    address, public = judge
    monkeypatch.setenv(SECRET_VAR, "open sesame")
    cert = tmp_path / "judge.key"
    cert.write_text(f'metadata\ncurve\n    public-key = "{public}"\n')
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(remote_spec({"address": address, "secret_env": SECRET_VAR,
                                            "curve_server_key": str(cert)})))
    assert load(path).env[0].remote.curve_server_key == str(cert)


def test_a_plain_address_is_still_an_address() -> None:
    spec = validate(remote_spec("spawn"), "t")
    assert spec.env[0].remote == RemoteSpec("spawn")


@pytest.mark.parametrize("remote, env, message", [
    ({"secret_env": SECRET_VAR}, {}, r"^env\[0\]\.remote\.secret_env: environment variable SLM_TEST_JUDGE_SECRET "
                                     r"is not set$"),
    ({"secret_env": SECRET_VAR, "curve_server_key": "PUBLIC"}, {SECRET_VAR: "wrong"},
     r"^env\[0\]\.remote: the judge at tcp://127\.0\.0\.1:\d+ refused the handshake: .*auth"),
    ({"secret_env": SECRET_VAR}, {SECRET_VAR: "open sesame"},
     r"^env\[0\]\.remote: no judge answered at .* within 2 s \(is a judge running there\? a judge with CURVE keys "
     r"also needs remote\.curve_server_key\)$"),
    ({"curve_server_key": "not-a-key"}, {},
     r'^env\[0\]\.remote\.curve_server_key: expected the judge\'s public key \(40 characters of z85, as serve prints '
     r'it\) or a certificate file, got "not-a-key"$'),
    ({"secret": "open sesame"}, {}, r'^env\[0\]\.remote\.secret: unknown key; did you mean "secret_env"\?$'),
    ({"timeout": 0}, {}, r"^env\[0\]\.remote\.timeout: expected a value >= 0\.1, got 0$"),
])
def test_client_option_mistakes_are_one_line_errors_at_their_key(judge, remote: dict, env: dict, message: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    address, public = judge
    monkeypatch.delenv(SECRET_VAR, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    remote = {k: public if v == "PUBLIC" else v for k, v in remote.items()}  # the judge's key, known only now
    with pytest.raises(SpecError, match=message):
        validate(remote_spec({"address": address, **remote}), "t")


@pytest.mark.parametrize("remote, message", [
    ({"address": "spawn", "secret_env": SECRET_VAR}, r"^env\[0\]\.remote: judges the lab starts \(\"spawn\"\) are its own"),
    ({"address": "http://x:1"}, r'^env\[0\]\.remote\.address: expected "spawn", "ray" or a judge address'),
])
def test_address_mistakes_in_the_object_form(remote: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        validate(remote_spec(remote), "t")
