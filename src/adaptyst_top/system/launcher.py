"""Start a command held at the door: its PID exists, its program has not started.

Probes attach to the PID first and then the command is let go, so nothing it does
is missed. The child is a bare Python (-S, no site: ~10 ms) waiting on a pipe; it execs
the command in place (same PID) once released.

A held command never runs unmonitored or orphaned: the gate asks the kernel to kill it
when the monitor dies (PR_SET_PDEATHSIG, kept across exec, checked against a parent
that already died), execs only on the exact release byte (EOF or anything else from a
monitor that went away means exit), and reports a failed exec on a close-on-exec pipe
so that the monitor can say why, with a shell's status (126, 127).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

import psutil

GO = b"g"  # exec, and die with the monitor
GO_KEEP = b"k"  # exec, and outlive the monitor (--keep-command)
EXEC_FAILED = 126  # found but not executable (format, interpreter, permission), as a shell
NOT_FOUND = 127
END_GRACE_S = 2.0  # between SIGTERM and SIGKILL when the monitor ends the command

GATE_PROGRAM = (
    "import ctypes, os, sys\n"
    "libc = ctypes.CDLL(None)\n"
    "libc.prctl(1, 9)\n"  # PR_SET_PDEATHSIG, SIGKILL
    "if os.getppid() != int(sys.argv[3]): os._exit(1)\n"  # the monitor died before prctl
    "fd, err = int(sys.argv[1]), int(sys.argv[2])\n"
    "go = os.read(fd, 1)\n"
    "if go not in (b'g', b'k'): os._exit(1)\n"  # the monitor went away: never run
    "if go == b'k': libc.prctl(1, 0)\n"
    "os.close(fd)\n"
    "os.set_inheritable(err, False)\n"  # closed by the exec: EOF tells the monitor it ran
    "try:\n"
    "    os.execv(sys.argv[4], sys.argv[5:])\n"
    "except OSError as e:\n"
    "    os.write(err, ('%d %s' % (e.errno, e.strerror)).encode())\n"
    "    os._exit(126)\n"
)


class LaunchError(RuntimeError):
    """Why the command cannot run, in one line, with the status a shell would give."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


class HeldCommand:
    def __init__(
        self,
        argv: Sequence[str],
        stdout: IO[Any] | int | None = None,
        stderr: IO[Any] | int | None = None,
        env: Mapping[str, str] | None = None,
        pass_fds: Sequence[int] = (),
    ) -> None:
        """ENV: variables added to the command's environment; PASS_FDS: descriptors it
        gets (as they are numbered here)."""
        if not argv or not argv[0]:
            raise LaunchError("no command given after --")
        exe = shutil.which(argv[0])
        if exe is None:
            if "/" not in argv[0]:
                raise LaunchError(f"cannot execute {argv[0]}: command not found", NOT_FOUND)
            missing = not os.path.exists(argv[0])
            raise LaunchError(
                f"cannot execute {argv[0]}: {_why_not(argv[0])}",
                NOT_FOUND if missing else EXEC_FAILED,
            )
        self.argv = list(argv)
        self.path = os.path.realpath(exe)
        r, self._w = os.pipe()
        self._err_r, err_w = os.pipe2(os.O_CLOEXEC)  # closed by a successful exec
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-S",
                    "-c",
                    GATE_PROGRAM,
                    str(r),
                    str(err_w),
                    str(os.getpid()),
                    exe,
                    *list(argv),
                ],
                pass_fds=(r, err_w, *pass_fds),
                env={**os.environ, **env} if env else None,
                stdout=stdout,
                stderr=stderr,
            )
        finally:
            os.close(r)
            os.close(err_w)
        self.pid = self.proc.pid
        self.released = False
        self.status: int | None = None  # as a shell reports it: 128+N when killed by N

    def release(self, keep: bool = False) -> None:
        """Let the command run; raises LaunchError when it could not be executed."""
        if self.released:
            return
        self.released = True
        try:
            os.write(self._w, GO_KEEP if keep else GO)
        finally:
            os.close(self._w)
        failure = _read_all(self._err_r)
        os.close(self._err_r)
        if failure:
            self.proc.wait()
            code, _, text = failure.decode(errors="replace").partition(" ")
            status = EXEC_FAILED
            if int(code or 0) == errno.ENOENT:
                if os.path.exists(self.path):  # as bash: 126, "bad interpreter"
                    text = "bad interpreter (its #! line names a program that does not exist)"
                else:
                    status = NOT_FOUND
            elif int(code or 0) == errno.ENOEXEC:
                text = "not an executable format"
            self.status = status
            raise LaunchError(f"cannot execute {self.argv[0]}: {text}", status)

    def poll(self) -> int | None:
        code = self.proc.poll()
        if code is not None and self.status is None:
            self.status = 128 - code if code < 0 else code
        return code

    def end(self, grace: float = END_GRACE_S) -> int | None:
        """Stop the command: SIGTERM, then SIGKILL after GRACE seconds (at once if it was
        never released). Returns its status as a shell reports it."""
        if not self.released:
            self.released = True
            os.close(self._w)  # the gate reads EOF and exits without running anything
            os.close(self._err_r)
            self.proc.kill()
        elif self.proc.poll() is None:
            # Its children too (a shell script's commands): found before the signal, while
            # they are still ours to find. One that made itself a daemon is out of reach.
            family = _descendants(self.pid)
            self.proc.send_signal(signal.SIGTERM)
            for p in family:
                with contextlib.suppress(psutil.Error):
                    p.terminate()
            deadline = time.monotonic() + grace
            while self.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.proc.poll() is None:
                self.proc.kill()
            _, alive = psutil.wait_procs(family, timeout=max(0.0, deadline - time.monotonic()))
            for p in alive:
                with contextlib.suppress(psutil.Error):
                    p.kill()
        self.proc.wait()
        self.poll()
        return self.status


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return []


def _read_all(fd: int) -> bytes:
    out = b""
    while True:
        chunk = os.read(fd, 512)
        if not chunk:
            return out
        out += chunk


def _why_not(path: str) -> str:
    if not os.path.exists(path):
        return "No such file or directory"
    if os.path.isdir(path):
        return "Is a directory"
    return "Permission denied"
