"""Start judges as subprocesses: ``spawn_judge`` runs ``python -m slm_lab_like.remote.judge`` and reads its address."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time

SECRET_ENV_VAR = "SLM_JUDGE_SECRET"


def spawn_judge(
    env: str,
    *,
    multi: bool = False,
    api: str | None = None,
    bind: str = "tcp://127.0.0.1:0",
    env_kwargs: dict | None = None,
    secret: str | None = None,
    startup_timeout: float = 60.0,
    extra_args: list[str] | None = None,
    cwd: str | None = None,
) -> tuple[subprocess.Popen, str]:
    """Start a judge subprocess for ``env`` (id or ``module:Class``) and return ``(process, address)``.

    ``api`` ("aec" or "parallel") names a multi-agent env's PettingZoo API (default: read from its class).
    The process's ``judge_info`` attribute holds the judge's start-up JSON (tokens of a multi judge).
    The current directory is put on the child's ``PYTHONPATH`` so ``module:Class`` entries resolve;
    stop it with :func:`stop_judge`.
    """
    cmd = [sys.executable, "-m", "slm_lab_like.remote.judge", "--env", env, "--bind", bind,
           "--kwargs", json.dumps(env_kwargs or {})]
    if multi:
        cmd.append("--multi")
    if api is not None:
        cmd += ["--api", api]
    child_env = child_environment(cwd or os.getcwd())
    if secret is not None:
        child_env[SECRET_ENV_VAR] = secret
        cmd += ["--secret-env", SECRET_ENV_VAR]
    cmd += list(extra_args or [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=child_env, cwd=cwd,
                            text=True)
    try:
        line = _read_line(proc, startup_timeout)
        info = json.loads(line)
    except BaseException:
        stop_judge(proc)
        raise
    proc.judge_info = info  # type: ignore[attr-defined]
    return proc, info["address"]


def child_environment(*extra_paths: str) -> dict[str, str]:
    """Environment for a child Python: this one plus the package root (and ``extra_paths``) on PYTHONPATH."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [*extra_paths, root, env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
    return env


def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    """Read the judge's first stdout line, failing if it exits or stays silent past ``timeout``."""
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if sel.select(timeout=min(0.5, max(0.0, deadline - time.monotonic()))):
                line = proc.stdout.readline()
                if line.strip():
                    return line
                if proc.poll() is not None:
                    break
            elif proc.poll() is not None:
                break
    finally:
        sel.close()
    raise RuntimeError(f"judge did not start (exit code {proc.poll()})")


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
