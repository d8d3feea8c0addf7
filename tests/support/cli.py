"""The command line as tests run it: this interpreter's, whatever is on PATH."""

import json
import signal
import subprocess
import sys
import time
from typing import Any

CLI = [sys.executable, "-m", "adaptyst_top.cli.start"]


def record_last(*args: str, timeout: float = 180) -> tuple[dict[str, Any], str]:
    """`record ARGS` run to its end: its last snapshot, and what the monitor and the
    program said on stderr (a failed run fails the test with that)."""
    proc = subprocess.run([*CLI, "record", *args], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1]), proc.stderr


def wait_started(pid: int, timeout: float = 60.0) -> None:
    """Until the CLI's first line (cli/start.py: SIGINT to its default) has run in PID:
    before it, the interpreter is still starting (importing `site`, coverage's hook),
    where a SIGINT is Python's own fatal error and no program's to handle. Read from
    the signals PID catches (none before the interpreter sets its SIGINT handler, then
    SIGINT, then none again), so that no wall-clock guess differs on a loaded node."""
    deadline = time.monotonic() + timeout
    sigint = 1 << (signal.SIGINT - 1)
    python_set = False
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/status") as f:
                caught = next(int(ln.split()[1], 16) for ln in f if ln.startswith("SigCgt:"))
        except (OSError, StopIteration):
            return  # gone: nothing left to wait for
        if caught & sigint:
            python_set = True
        elif python_set:
            return
        time.sleep(0.001)
    raise AssertionError(f"pid {pid}: the CLI did not start within {timeout:.0f} s")
