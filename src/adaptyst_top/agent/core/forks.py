"""The agent's side of its fork server (agent/core/fork_server.py): started as the agent
starts, asked for each user's worker. A worker it cannot fork (the server not up yet,
gone or late) is exec'd fresh as before, and a server that failed is started again on
a thread of its own, so no user waits for it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import weakref

from adaptyst_top.agent.core import fork_server
from adaptyst_top.system.readable import readable

START_TIMEOUT_S = 30.0  # its interpreter and imports, from a cold NFS /opt
ANSWER_TIMEOUT_S = 2.0  # a fork takes ms; later than this it is killed and started again
KINDS = {
    "adaptyst_top.agent.worker.open_files": b"o",
    "adaptyst_top.agent.worker.parse_elf": b"p",
    "adaptyst_top.agent.worker.unwind_stacks": b"u",
}
assert set(KINDS.values()) == set(fork_server.WORKERS)


class Forked:
    """What the agent uses of subprocess.Popen, for a worker the fork server forked: the
    agent is not its parent, so it watches and kills it through its pidfd (kept open for
    this object's life: a pid alone could be another process's by then) and knows
    only that it ended (returncode -1), not how."""

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._fd = pidfd
        weakref.finalize(self, _close, pidfd)

    def poll(self) -> int | None:
        if self.returncode is None and readable([self._fd], 0):
            self.returncode = -1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and not readable([self._fd], timeout):
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
        self.returncode = -1
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._fd, signal.SIGKILL)


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


class ForkServer:
    """The one fork server, its link used one request at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._link: socket.socket | None = None
        self._starting = False
        self._closed = False

    def start(self) -> None:
        """Start it and wait until it has imported what the workers run (the agent's
        preload thread; a restart's own thread)."""
        with self._lock:
            if self._closed or self._proc is not None or self._starting:
                return
            self._starting = True
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        proc = None
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-m", fork_server.__name__, str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,  # its children's too: no user writes to root's log
                env={},
                cwd="/",
            )
            theirs.close()
            up = readable([ours], START_TIMEOUT_S) and ours.recv(1) == b"R"
        except OSError:
            up = False
        with self._lock:
            self._starting = False
            if up and not self._closed and proc is not None:
                self._proc, self._link = proc, ours
                return
        theirs.close()
        ours.close()
        if proc is not None:
            _stop(proc)
        print("adaptyst-top agent: the fork server did not start", file=sys.stderr)

    @property
    def up(self) -> bool:
        return self._link is not None

    def fork(self, module: str, fd: int) -> Forked | None:
        """A worker running MODULE's main() on descriptor FD (a copy is sent), or None:
        the caller execs one fresh."""
        kind = KINDS.get(module)
        with self._lock:
            link = self._link
            if kind is None or link is None:
                return None
            try:
                socket.send_fds(link, [kind], [fd])
                if readable([link], ANSWER_TIMEOUT_S):
                    pid, fds, _flags, _addr = socket.recv_fds(link, 16, 1)
                else:
                    pid, fds = b"", []
            except OSError:
                pid, fds = b"", []
            if len(pid) == fork_server.PID.size and len(fds) == 1:
                return Forked(fork_server.PID.unpack(pid)[0], fds[0])
            for got in fds:
                _close(got)
            failed = self._take()
        if failed is not None:  # not answered as asked: it is started again
            _stop(failed)
            threading.Thread(target=self.start, name="agent-fork-server", daemon=True).start()
        return None

    def _take(self) -> subprocess.Popen[bytes] | None:
        """Forget the server (the lock held); the process to stop."""
        proc, link = self._proc, self._link
        self._proc = self._link = None
        if link is not None:
            link.close()
        return proc

    def close(self) -> None:
        """Stop it (the agent stops); the workers it forked run on until their links close."""
        with self._lock:
            self._closed = True
            proc = self._take()
        if proc is not None:
            _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(1.0)


SERVER = ForkServer()
