"""Files opened as the user who named them: the kernel resolves each path and checks
every folder and the file itself (ACLs and LSMs included) for that user, and the agent
reads and probes the descriptor it got, never the path again. A symbolic link swapped
after the check then changes nothing, and a missing file and a hidden one look alike.

The opening is done by a thread of its own that takes the user's ids with raw system
calls (glibc's wrappers would change every thread of the agent) and then ends: its
credentials end with it.
"""

from __future__ import annotations

import ctypes
import os
import platform
import stat
import threading
from collections.abc import Sequence

# setgroups, setresgid, setresuid: the kernel's per-thread calls.
_SYSCALLS = {"x86_64": (116, 119, 117), "aarch64": (159, 149, 147)}
_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4


class NotOpened(Exception):
    """Why a path was not opened for the user, in one line."""


def open_as(uid: int, gid: int, groups: Sequence[int], paths: Sequence[str]) -> list[int | None]:
    """Each of PATHS opened read-only as UID:GID with GROUPS, or None where that user
    could not (missing, hidden, not a regular file). NotOpened when the thread cannot
    become the user (then nothing is opened)."""
    calls = _SYSCALLS.get(platform.machine())
    if calls is None:
        raise NotOpened(f"opening files as a user is not written for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    dumpable = libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)
    out: list[int | None] = []
    failed: list[str] = []

    def as_user() -> None:
        setgroups, setresgid, setresuid = calls
        ids = (ctypes.c_uint * max(1, len(groups)))(*groups)
        for call, args in (
            (setgroups, (len(groups), ids)),
            (setresgid, (gid, gid, gid)),
            (setresuid, (uid, uid, uid)),
        ):
            if libc.syscall(call, *args) != 0:
                failed.append(os.strerror(ctypes.get_errno()))
                return
        out.extend(_open_regular(p) for p in paths)

    worker = threading.Thread(target=as_user, name="open-as-user")
    worker.start()
    worker.join()
    # Taking a user's ids makes the kernel mark the process not dumpable: as it was.
    if dumpable >= 0:
        libc.prctl(_PR_SET_DUMPABLE, dumpable, 0, 0, 0)
    if failed:
        raise NotOpened(f"could not take uid {uid}'s ids to open files: {failed[0]}")
    return out


def _open_regular(path: str) -> int | None:
    """PATH opened for reading if it is a regular file: first without reading it (a FIFO
    or a device is never opened for real), then the inode held reopened."""
    try:
        held = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(held).st_mode):
            return None
        return os.open(f"/proc/self/fd/{held}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    finally:
        os.close(held)
