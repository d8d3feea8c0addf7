"""The agent's fork server: one process, exec'd fresh by the agent as it starts (root,
one thread, an empty environment, run as `python -I -m ...fork_server FD`), that imports
what the users' workers run, then forks a worker each time the agent asks. A worker
exec'd fresh spent 40-60 ms starting its interpreter and imports, on a user's first
probe; forked here, it starts in a few ms (bench/bench_agent_first_probe.py). The child
then runs the worker's own main(), which takes its user's ids before it reads a byte
from her, exactly as an exec'd one does (agent/worker/open_files.become).

What a forked worker shares with this process and with other users' workers: its
address space's layout (as Android's zygote), the hash seed and the imported modules'
state. None of it is a secret: this process reads only the agent's requests (a kind, a
socket), holds nothing of the agent's memory and no user's data, and each child closes
every descriptor but its own socket (this process's link to the agent first) before its
worker runs. Nothing here parses a user's file. It exits when the agent's end closes.

A request is one byte naming the kind with the worker's socket attached (SCM_RIGHTS);
the answer is the child's pid (4 bytes) with its pidfd attached, or an empty answer
(the fork failed, or the request was not one). The agent watches and kills each child
through its pidfd; this process reaps them (SIGCHLD), never between a fork and the
pidfd's open, so a pidfd always names its own child, never a recycled pid.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import os
import signal
import socket
import struct
import sys
from collections.abc import Callable

WORKERS = {
    b"o": "adaptyst_top.agent.worker.open_files",
    b"p": "adaptyst_top.agent.worker.parse_elf",
    b"u": "adaptyst_top.agent.worker.unwind_stacks",
}
NAMES = {b"o": b"adt-opener", b"p": b"adt-parser", b"u": b"adt-unwinder"}
READY_NAME = b"adt-fork-server"  # once it serves (15 bytes: the kernel's limit)
# What the workers import once they run as the user, imported here so a child has it.
# Importing runs only our own modules' top level; no user's data is read here.
IMPORTED_LATER = (
    "adaptyst_top.collectors.probes.debug_names",
    "adaptyst_top.collectors.probes.demangle",
    "adaptyst_top.collectors.probes.elf_info",
    "adaptyst_top.collectors.probes.entry_safety",
    "adaptyst_top.runtime.listing",
    "adaptyst_top.collectors.profile.sampler",
    "adaptyst_top.collectors.profile.tally",
)
PID = struct.Struct("=i")
WORKER_FD = 3  # where a child's socket is put, every other descriptor closed
_PR_SET_NAME = 15


def _run_child(main: Callable[[list[str]], None], name: bytes, fd: int, link: int) -> None:
    """In the child: nothing of the server's kept but the code; never returns."""
    code = 1
    try:
        os.close(link)  # a user's worker must never reach root's fork server
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        if fd != WORKER_FD:
            os.dup2(fd, WORKER_FD)
        os.closerange(WORKER_FD + 1, os.sysconf("SC_OPEN_MAX"))
        _name(name)
        main(["worker", str(WORKER_FD)])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os._exit(code)  # never back into the server's loop


def _name(name: bytes) -> None:
    """NAME as the process's (ps -o comm, top): its command line stays the server's."""
    ctypes.CDLL(None).prctl(_PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)


def serve(link: socket.socket, mains: dict[bytes, Callable[[list[str]], None]]) -> None:
    """Fork a worker for each request on LINK until the agent closes it."""
    while True:
        try:
            kind, fds, _flags, _addr = socket.recv_fds(link, 16, 4)
        except OSError:
            return
        if not kind and not fds:
            return  # the agent is gone
        main = mains.get(kind)
        if main is None or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            link.send(b"")
            continue
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        pid = 0
        try:
            pid = os.fork()
            if pid == 0:
                _run_child(main, NAMES[kind], fds[0], link.fileno())
            pidfd = os.pidfd_open(pid)  # not reaped yet: SIGCHLD is held
        except OSError:
            if pid > 0:
                os.kill(pid, signal.SIGKILL)
            link.send(b"")
            continue
        finally:
            os.close(fds[0])
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        try:
            socket.send_fds(link, [PID.pack(pid)], [pidfd])
        except OSError:
            os.kill(pid, signal.SIGKILL)
            return
        finally:
            os.close(pidfd)


def _reap(_signum: int, _frame: object) -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv: list[str]) -> None:
    link = socket.socket(fileno=int(argv[1]))
    signal.signal(signal.SIGCHLD, _reap)
    mains = {k: importlib.import_module(m).main for k, m in WORKERS.items()}
    for module in IMPORTED_LATER:
        importlib.import_module(module)
    gc.freeze()  # what is imported stays out of the collector's writes: shared with children
    _name(READY_NAME)
    link.send(b"R")
    serve(link, mains)


if __name__ == "__main__":
    main(sys.argv)
