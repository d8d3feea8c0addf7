"""Busy loops and other helpers a test starts that would otherwise run on after it:
each dies with the process that started it (PR_SET_PDEATHSIG, kept across exec), so a
killed run (SIGKILL, a timeout) leaves none spinning on the node."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

# Set the death signal, make sure the parent is still the one that asked (it may have
# died before the prctl), then become ARGV: the same PID, the signal kept.
_GUARD = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"  # PR_SET_PDEATHSIG
    "if os.getppid() != int(sys.argv[1]): sys.exit(1)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def guarded(argv: list[str]) -> list[str]:
    """ARGV as a child of this process runs it to die with this process (also under
    Popen's user=: the signal is set after the change of user)."""
    return [sys.executable, "-c", _GUARD, str(os.getpid()), *argv]


def spin(argv: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """ARGV started as a child that dies with this process."""
    return subprocess.Popen(guarded(argv), **kwargs)


BUSY_LOOP = ["sh", "-c", "while :; do :; done"]
