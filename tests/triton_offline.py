"""Run a script that calls ``triton.compile`` for a GPU target on this machine, with no GPU:
a process of its own, where ``TRITON_INTERPRET`` (set for the interpreter tests) is not."""

from __future__ import annotations

import os
import subprocess
import sys


def run_offline(script: str, stdin: str) -> str:
    """``script`` run by this Python with ``stdin``; its stdout (the script must succeed)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
