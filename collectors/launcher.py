"""Start a command held at the door: its PID exists, its program has not started.

Probes attach to the PID first and then the command is let go, so nothing it does
is missed. The child is a bare Python (-S, no site: ~10 ms) waiting on a pipe; it execs
the command in place (same PID) once released.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import IO, Any

_GATE = (
    "import os, sys\n"
    "fd = int(sys.argv[1])\n"
    "os.read(fd, 1)\n"
    "os.close(fd)\n"
    "os.execv(sys.argv[2], sys.argv[3:])\n"
)


class LaunchError(RuntimeError):
    pass


class HeldCommand:
    def __init__(
        self,
        argv: Sequence[str],
        stdout: IO[Any] | int | None = None,
        stderr: IO[Any] | int | None = None,
    ) -> None:
        if not argv:
            raise LaunchError("no command given after --")
        exe = shutil.which(argv[0])
        if exe is None:
            raise LaunchError(f"{argv[0]}: command not found")
        self.argv = list(argv)
        self.path = os.path.realpath(exe)
        r, self._w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-S", "-c", _GATE, str(r), exe, *argv],
                pass_fds=(r,),
                stdout=stdout,
                stderr=stderr,
            )
        finally:
            os.close(r)
        self.pid = self.proc.pid
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            os.write(self._w, b"g")
            os.close(self._w)

    def poll(self) -> int | None:
        return self.proc.poll()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if not self.released:
            self.released = True
            os.close(self._w)
