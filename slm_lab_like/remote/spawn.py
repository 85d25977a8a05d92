"""Start judges as subprocesses: ``spawn_judge`` runs ``python -m slm_lab_like.remote.judge`` and reads its address.

It takes the same env names and judge options as ``serve`` (:mod:`~slm_lab_like.remote.options`) and hands
them to the judge's command line; secrets travel in the child's environment or a private file, never on its
command line.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from slm_lab_like.remote.options import BY_NAME

SECRET_ENV_VAR = "SLM_JUDGE_SECRET"


class JudgeProcess(subprocess.Popen):
    """A judge subprocess: a ``Popen`` whose ``judge_info`` is the judge's start-up JSON."""

    judge_info: dict[str, Any]


def spawn_judge(
    env: str,
    *,
    multi: bool = False,
    api: str | None = None,
    bind: str = "tcp://127.0.0.1:0",
    env_kwargs: dict | None = None,
    startup_timeout: float = 60.0,
    extra_args: list[str] | None = None,
    cwd: str | None = None,
    **options: Any,
) -> tuple[JudgeProcess, str]:
    """Start a judge subprocess for ``env`` (any env name the registry knows) and return ``(process, address)``.

    The env's kind picks the judge (``multi=True`` only insists on a multi-agent one); ``api`` ("aec" or
    "parallel") overrides a multi-agent env's PettingZoo API. ``options`` are judge options by name
    (``secret``, ``curve_secret_key`` as the key or a certificate file, timeouts, ``allow_claim``, ...).
    The process's ``judge_info`` attribute holds the judge's start-up JSON (tokens of a multi judge, its public
    CURVE key). The current directory is put on the child's ``PYTHONPATH`` so ``module:Class`` entries
    resolve. A judge that cannot start is a RuntimeError with its one-line reason; stop it with
    :func:`stop_judge`.
    """
    cmd = [sys.executable, "-m", "slm_lab_like.remote.judge", "--env", env, "--bind", bind,
           "--kwargs", json.dumps(env_kwargs or {})]
    if multi:
        cmd.append("--multi")
    if api is not None:
        cmd += ["--api", api]
    child_env = child_environment(cwd or os.getcwd())
    with tempfile.TemporaryDirectory(prefix="judge-") as private:
        cmd += option_args(options, child_env, private) + list(extra_args or [])
        proc = JudgeProcess(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                env=child_env, cwd=cwd)
        try:
            line, err = _read_start(proc, startup_timeout)
        except BaseException:
            stop_judge(proc)
            assert proc.stderr is not None  # Popen(stderr=PIPE)
            proc.stderr.close()
            raise
    sys.stderr.write(err.decode("utf-8", "replace"))
    threading.Thread(target=_forward, args=(proc.stderr,), name=f"judge-{proc.pid}-stderr", daemon=True).start()
    info = json.loads(line)
    proc.judge_info = info
    return proc, info["address"]


def option_args(options: dict[str, Any], child_env: dict[str, str], private: str) -> list[str]:
    """The judge command-line arguments of ``options``: the secret goes into ``child_env``, a CURVE key given as
    bytes into a certificate file in the ``private`` directory."""
    args: list[str] = []
    for name, value in options.items():
        option = BY_NAME.get(name)
        if option is None:
            raise TypeError(f"unknown judge option {name!r}; known: {', '.join(BY_NAME)}")
        if value is None or value is False:
            continue
        if name == "secret":
            child_env[SECRET_ENV_VAR] = value
            value = SECRET_ENV_VAR
        elif name == "curve_secret_key" and isinstance(value, bytes):
            value = _write_certificate(value, private)
        args += [option.flag] if value is True else [option.flag, str(os.fspath(value))
                                                      if isinstance(value, os.PathLike) else str(value)]
    return args


def _write_certificate(secret_key: bytes, directory: str) -> str:
    """Write a ZeroMQ certificate file holding ``secret_key`` (and its public key), readable by its owner only."""
    import zmq

    path = os.path.join(directory, "judge.key_secret")
    public = zmq.curve_public(secret_key).decode()
    text = f'metadata\ncurve\n    public-key = "{public}"\n    secret-key = "{secret_key.decode()}"\n'
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def child_environment(*extra_paths: str) -> dict[str, str]:
    """Environment for a child Python: this one plus the package root (and ``extra_paths``) on PYTHONPATH."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [*extra_paths, root, env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
    return env


def _read_start(proc: subprocess.Popen, timeout: float) -> tuple[bytes, bytes]:
    """The judge's first stdout line and what it wrote to stderr meanwhile; RuntimeError with its last stderr line
    when it exits or stays silent past ``timeout``."""
    stdout, stderr = proc.stdout, proc.stderr
    assert stdout is not None and stderr is not None  # Popen(stdout=PIPE, stderr=PIPE)
    sel = selectors.DefaultSelector()
    sel.register(stdout, selectors.EVENT_READ)
    sel.register(stderr, selectors.EVENT_READ)
    err = b""
    deadline = time.monotonic() + timeout
    try:
        while sel.get_map() and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=min(0.5, max(0.0, deadline - time.monotonic()))):
                if key.fileobj is stdout:
                    line = stdout.readline()
                    if line.strip():
                        return line, err
                    if not line:
                        sel.unregister(stdout)
                else:
                    chunk = os.read(stderr.fileno(), 65536)
                    err = (err + chunk)[-65536:]
                    if not chunk:
                        sel.unregister(stderr)
    finally:
        sel.close()
    lines = [x for x in err.decode("utf-8", "replace").splitlines() if x.strip()]
    reason = lines[-1] if lines else f"exit code {proc.poll()}"
    raise RuntimeError(f"judge did not start: {reason}")


def _forward(stream: Any) -> None:
    """Copy a judge's stderr to this process's stderr until it closes."""
    try:
        for line in iter(stream.readline, b""):
            sys.stderr.write(line.decode("utf-8", "replace"))
    except (OSError, ValueError):
        pass
    finally:
        stream.close()


def stop_judge(proc: subprocess.Popen, timeout: float = 5.0) -> None:
    """Stop a judge subprocess: SIGTERM, then SIGKILL if it lingers."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
    if proc.stdout is not None:
        proc.stdout.close()
