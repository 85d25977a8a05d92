"""Processes a test starts (judges, players, servers): one way to stop them, whatever state the test left them in."""
from __future__ import annotations

import os
import signal
import subprocess


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
