"""What a test's own helper processes need: busy loops and other helpers that would
otherwise run on after it die with the process that started them (PR_SET_PDEATHSIG
through util-linux's setpriv, kept across the exec), so a killed run (SIGKILL, a
timeout) leaves none spinning on the node; and an environment without coverage's."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping
from typing import Any

BUSY_LOOP = ["sh", "-c", "while :; do :; done"]
SETPRIV = "/usr/bin/setpriv"


def without_coverage(env: Mapping[str, str]) -> dict[str, str]:
    """ENV less what starts coverage in a Python process (make test's `patch =
    subprocess`): for a target whose exact output a test checks and whose exit coverage
    cannot follow (its working folder removed)."""
    return {k: v for k, v in env.items() if not k.startswith("COVERAGE_")}


def guarded(argv: list[str]) -> list[str]:
    """ARGV run to die with the process that starts it (also under Popen's user=: the
    signal is set after the change of user)."""
    return [SETPRIV, "--pdeathsig", "KILL", "--", *argv]


def spin(argv: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """ARGV started as a child that dies with this process, once it is ARGV (the PID
    that setpriv had is then the helper's)."""
    proc = subprocess.Popen(guarded(argv), **kwargs)
    wait_exec(proc.pid)
    return proc


def wait_exec(pid: int, timeout: float = 5.0) -> None:
    """Until PID no longer runs setpriv (it exec'd what it guards, or ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.readlink(f"/proc/{pid}/exe") != SETPRIV:
                return
        except OSError:
            return
        time.sleep(0.001)
