"""Processes a test starts (judges, players, servers, labs): one way to stop them, whatever state the test left them
in, and one way to kill a lab run at a file it writes."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def stop(proc: subprocess.Popen) -> None:
    """Resume it if the test stopped it, terminate it (kill after 5 s), reap it and close its pipes."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait(10)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None and not stream.closed:
            stream.close()


def kill_lab_at(spec_file: Path, out: Path, pattern: str, settle: float = 0.0, timeout: float = 120.0,
                cwd: Path = ROOT, args: tuple[str, ...] = ()) -> Path:
    """Run `run_lab.py spec_file --out out [args]` in `cwd` until a file matching `pattern` (a glob under `out`)
    appears, `settle` seconds more, then SIGKILL it (no clean-up of its own runs); the file found."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "run_lab.py"), str(spec_file), "--out", str(out), "-q", *args],
                            cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout
        found: list[Path] = []
        while time.monotonic() < deadline and proc.poll() is None and not found:
            found = list(out.glob(pattern))
            time.sleep(0.01)
        assert found, proc.stderr.read().decode() if proc.poll() is not None else f"no {pattern} in time"
        time.sleep(settle)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        stop(proc)
    return found[0]
