"""The byte links to a node agent: its Unix socket on this node, or `ssh NODE
adaptyst-top bridge` to another's. Every wait on a link ends by its deadline or as soon
as its stop flag is set; nothing here blocks past them, a large request included."""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import socket
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence

from adaptyst_top.runtime.stop_flag import StopFlag
from adaptyst_top.snapshot.inert import inert

CONNECT_TIMEOUT_S = 5.0

SSH_ENV = "ADAPTYST_TOP_SSH"  # the ssh command and its options ("ssh" by default)
REMOTE_ENV = "ADAPTYST_TOP_REMOTE"  # adaptyst-top's path on the other node


class Transport(ABC):
    """Bytes to and from the agent; every wait ends by DEADLINE (TimeoutError) or as
    soon as STOP is set (AgentInterrupted)."""

    deadline: float = float("inf")  # time.monotonic()
    stop: StopFlag | None = None

    @abstractmethod
    def send(self, data: bytes) -> None: ...

    @abstractmethod
    def recv(self, size: int) -> bytes: ...

    @abstractmethod
    def close(self) -> None: ...

    def left(self) -> float | None:
        """Seconds to the deadline (None: there is none); TimeoutError once past it."""
        if self.deadline == float("inf"):
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer in time")
        return left

    def wait_for(self, fd: int, write: bool = False) -> None:
        """Until FD can be read (WRITE: written) without blocking."""
        if fd < 0:  # a socket closed (after a request that was not answered in time)
            raise ConnectionResetError("the link to the agent is closed")
        stop = [] if self.stop is None else [self.stop.fileno()]
        while True:
            ready, writable, _ = select.select(
                [*stop] if write else [fd, *stop], [fd] if write else [], [], self.left()
            )
            if fd in ready or fd in writable:
                return
            if self.stop is not None and self.stop.is_set():
                raise AgentInterrupted("stopped")

    def send_all(self, fd: int, data: bytes) -> None:
        """DATA written to FD (non-blocking) by the deadline: a peer that stops reading
        holds a large request (an open with thousands of specs) no longer than that."""
        view = memoryview(data)
        while view:
            self.wait_for(fd, write=True)
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                continue


class SocketTransport(Transport):
    def __init__(self, path: str) -> None:
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(CONNECT_TIMEOUT_S)
            try:
                self.sock.connect(path)
                self.sock.setblocking(False)  # each wait is wait_for's, with its deadline
                return
            except BlockingIOError:
                # The agent's queue is full (another user's connect flood): it drains
                # the queue at once, so a moment later there is room.
                self.sock.close()
                if time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                raise AgentUnavailable(f"the agent at {path} is too busy: try later") from None
            except OSError as exc:
                self.sock.close()
                raise AgentUnavailable(f"no agent at {path}: {exc.strerror or exc}") from None

    def send(self, data: bytes) -> None:
        self.send_all(self.sock.fileno(), data)

    def recv(self, size: int) -> bytes:
        while True:
            self.wait_for(self.sock.fileno())
            try:
                return self.sock.recv(size)
            except BlockingIOError:
                continue  # woken for nothing: wait again

    def close(self) -> None:
        self.sock.close()


def ssh_argv(host: str, *args: str) -> list[str]:
    """`ssh HOST adaptyst-top ARGS` as this user's ssh runs it ($ADAPTYST_TOP_SSH,
    $ADAPTYST_TOP_REMOTE); BatchMode: a password prompt would hang under the screen."""
    ssh = shlex.split(os.environ.get(SSH_ENV, "ssh"))
    remote = os.environ.get(REMOTE_ENV, "adaptyst-top")
    return [*ssh, "-o", "BatchMode=yes", "--", host, remote, *args]


class SshTransport(Transport):
    """`ssh HOST adaptyst-top bridge [ARGS]`: its standard input and output are the
    socket's (ARGS: a relay's, runtime/job_tree.py)."""

    def __init__(self, host: str, args: Sequence[str] = ()) -> None:
        argv = ssh_argv(host, "bridge", *args)
        try:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        except OSError as exc:
            raise AgentUnavailable(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
        self.host = host
        self.closed = False
        assert self.proc.stdin is not None
        # Written a request at a time with os.write (the file object is never written:
        # nothing is buffered in it), never blocking past the deadline or the stop.
        os.set_blocking(self.proc.stdin.fileno(), False)

    def send(self, data: bytes) -> None:
        if self.closed:  # a write to the closed pipe would be a ValueError, not a break
            raise ConnectionResetError("the link to the agent is closed")
        assert self.proc.stdin is not None
        self.send_all(self.proc.stdin.fileno(), data)

    def recv(self, size: int) -> bytes:
        if self.closed:
            raise ConnectionResetError("the link to the agent is closed")
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        self.wait_for(fd)
        return os.read(fd, size)

    def why_closed(self) -> str:
        """What ssh said on its way out (its last line), once it has ended."""
        try:
            _, err = self.proc.communicate(timeout=1)
        except subprocess.TimeoutExpired:
            return ""
        lines = err.decode(errors="replace").strip().splitlines()
        return inert(lines[-1]) if lines else ""  # the remote's words

    def close(self) -> None:
        self.closed = True
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            # A send that met a closed pipe left its bytes in stdin's buffer: closing
            # flushes them into the same closed pipe. Nothing is waiting for them.
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()


class AgentUnavailable(OSError):
    """No agent answers at that socket, in one line."""


class AgentRefused(RuntimeError):
    """The agent answered with an error line (a refusal, a bad spec...)."""


class AgentInterrupted(Exception):
    """A wait for the agent given up: the run was stopped, or its time is up."""
