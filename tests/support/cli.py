"""The command line as tests run it: this interpreter's, whatever is on PATH."""

import json
import subprocess
import sys
from typing import Any

CLI = [sys.executable, "-m", "adaptyst_top.cli.start"]


def record_last(*args: str, timeout: float = 180) -> tuple[dict[str, Any], str]:
    """`record ARGS` run to its end: its last snapshot, and what the monitor and the
    program said on stderr (a failed run fails the test with that)."""
    proc = subprocess.run([*CLI, "record", *args], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1]), proc.stderr
