"""Files opened as the user who named them, by a process of that user's: the agent execs
a fresh opener (agent/worker/open_files.py) that takes the user's ids before it reads the
request, and receives the descriptors it opened over SCM_RIGHTS. No thread of the
agent ever holds a user's ids: a thread that did made the agent's memory readable and
its threads signalable by that user (the kernel checks a thread's own ids for both).

The kernel resolves each path and checks every folder and the file itself for that
user, so a missing file and a hidden one look alike, and the agent reads and probes the
descriptor it got, never the path again. The opener is believed in nothing: each
descriptor is checked here again (a regular file, off FUSE), and an opener that answers
wrongly, late or not at all is killed and costs only its own user one line. One user's
opens wait for each other; other users' never wait for them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import stat
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from adaptyst_top.agent.core.kept_workers import KeptWorkers, Worker, WorkerFailed, end
from adaptyst_top.agent.worker import open_files as opener_worker
from adaptyst_top.system.readable import readable

WORKER = Path(opener_worker.__file__)
# A lookup a user's file system holds up is given up on after this; the opener is killed.
OPEN_TIMEOUT_S = 5.0
_MAX_ANSWER = 64 * 1024
_O_PATH = 0o10000000  # Linux's; Python names it only where the platform has it
REQUEST_PATHS = 32  # paths a request message: 32 x PATH_MAX (4 KiB) fits a socket's buffer


class NotOpened(Exception):
    """Why a path was not opened for the user, in one line."""


# One opener per user's ids, kept while it is used (it exits IDLE_S after its last
# request): a list or the picker's typing costs a request, not a process (36 ms).
_KEPT = KeptWorkers("an opener", [sys.executable, "-I", "-S", str(WORKER)], spare=True)
_openers = _KEPT.kept


class _Gone(Exception):
    """A kept opener had exited (idle) before it read the request."""


def warm(uid: int, gid: int, groups: Sequence[int]) -> None:
    """UID's opener started ahead of her first request (KeptWorkers.warm)."""
    _KEPT.warm(uid, gid, groups)


def open_as(uid: int, gid: int, groups: Sequence[int], paths: Sequence[str]) -> list[int | None]:
    """Each of PATHS opened read-only as UID:GID with GROUPS, or None where that user
    could not (missing, hidden, not a regular file, on FUSE, through a magic link).
    NotOpened when the opener fails or takes longer than OPEN_TIMEOUT_S (then nothing
    is opened)."""
    if len(paths) > opener_worker.MAX_PATHS:
        raise NotOpened(f"at most {opener_worker.MAX_PATHS} files are opened at once")
    deadline = time.monotonic() + OPEN_TIMEOUT_S
    lock = _KEPT.user_lock(uid)
    if not lock.acquire(timeout=OPEN_TIMEOUT_S):
        raise NotOpened(f"uid {uid}'s earlier opens took over {OPEN_TIMEOUT_S:g} s: given up")
    key = (uid, gid, tuple(sorted(groups)))
    try:
        kept = _KEPT.take(key)
        if kept is not None:
            with contextlib.suppress(_Gone):  # exited idle a moment ago: a fresh one
                got = _ask(kept, uid, list(paths), deadline, kept=True)
                _KEPT.keep(key, kept)
                return got
        try:
            opener = _KEPT.start(uid, gid, groups)
        except WorkerFailed as exc:
            raise NotOpened(str(exc)) from None
        got = _ask(opener, uid, list(paths), deadline, kept=False)
        _KEPT.keep(key, opener)
        return got
    finally:
        lock.release()


def end_all() -> None:
    """End every kept opener."""
    _KEPT.end_all()


def _ask(
    opener: Worker, uid: int, paths: list[str], deadline: float, kept: bool
) -> list[int | None]:
    """PATHS opened by OPENER; it is ended on any failure (_Gone: a kept one had exited)."""
    got: list[int | None] = []
    try:
        # A request a message, small enough for the socket's buffer (256 paths of 4 KiB
        # in one were refused: EMSGSIZE); one answer each.
        for start in range(0, max(1, len(paths)), REQUEST_PATHS):
            chunk = paths[start : start + REQUEST_PATHS]
            try:
                opener.link.sendall(json.dumps({"paths": chunk}).encode())
            except OSError:
                if kept and not got:
                    raise _Gone from None
                raise NotOpened(f"the opener for uid {uid} is gone") from None
            answer = _receive(opener.link, uid, deadline, kept and not got)
            if len(answer) != len(chunk):
                got.extend(answer)
                raise NotOpened(f"the opener for uid {uid} answered wrongly")
            got.extend(answer)
        if len(got) != len(paths):
            raise NotOpened(f"the opener for uid {uid} answered wrongly")
        return got
    except BaseException:
        for fd in got:
            if fd is not None:
                os.close(fd)
        end(opener)
        raise


def _receive(link: socket.socket, uid: int, deadline: float, first: bool) -> list[int | None]:
    """One answer of the opener: a descriptor or None for each path of its chunk.
    FIRST: the first answer of a kept opener (one that closed instead is _Gone)."""
    wait = deadline - time.monotonic()
    if wait <= 0 or not readable([link], wait):
        raise NotOpened(f"opening files as uid {uid} took over {OPEN_TIMEOUT_S:g} s: given up")
    fds: list[int] = []
    try:
        data, ancillary, flags, _ = socket.recv_fds(link, _MAX_ANSWER, 253, socket.MSG_CMSG_CLOEXEC)
        fds = list(ancillary)
        if not data and not fds and first:
            raise _Gone
        opened = json.loads(data) if data else None
        if (
            not isinstance(opened, dict)
            or not isinstance(flags_list := opened.get("opened"), list)
            or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC)
            or sum(1 for f in flags_list if f is True) != len(fds)
        ):
            raise ValueError("a malformed answer")
    except ConnectionResetError:
        if first:  # a kept opener that ended (its user may kill it): a fresh one
            raise _Gone from None
        raise NotOpened(f"the opener for uid {uid} ended") from None
    except (OSError, ValueError):
        for fd in fds:
            os.close(fd)
        raise NotOpened(f"the opener for uid {uid} answered wrongly") from None
    handed = iter(fds)
    return [_checked(next(handed)) if f is True else None for f in flags_list]


def _checked(fd: int) -> int | None:
    """FD if it is what the opener is to give: a regular file off FUSE, opened for
    reading (an O_PATH descriptor is no proof of read access: the agent reads through
    the descriptor it gets, /proc/self/fd/N reopened as root), else closed."""
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        readable = flags & os.O_ACCMODE == os.O_RDONLY and not flags & _O_PATH
        if readable and stat.S_ISREG(os.fstat(fd).st_mode) and not opener_worker.on_fuse(fd):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


__all__ = ["OPEN_TIMEOUT_S", "NotOpened", "end_all", "open_as"]
