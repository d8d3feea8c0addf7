"""The suite's busy loops die with the process that started them: a run killed by
SIGKILL leaves none spinning on the node."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.waits import wait_until

STARTER = (
    "import sys, time\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "from tests.support.spin import BUSY_LOOP, spin\n"
    "print(spin(BUSY_LOOP).pid, flush=True)\n"
    "time.sleep(60)\n"
)


def test_a_busy_loop_dies_with_a_killed_starter() -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, root], stdout=subprocess.PIPE, text=True
    )
    try:
        assert starter.stdout is not None
        pid = int(starter.stdout.readline())
        assert wait_until(lambda: _comm(pid) == "sh", 5.0)  # the loop itself, same PID
    finally:
        starter.kill()
        starter.wait()
    assert wait_until(lambda: _state(pid) in (None, "Z"), 5.0)  # gone, or dead unreaped


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0]
    except OSError:
        return None


def _comm(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None
