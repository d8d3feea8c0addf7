"""Files opened as the user who named them: the kernel resolves each path and checks
every folder and the file itself (ACLs and LSMs included) for that user, and the agent
reads and probes the descriptor it got, never the path again. A symbolic link swapped
after the check then changes nothing, and a missing file and a hidden one look alike.

The opening is done by a thread of its own that takes the user's ids with raw system
calls (glibc's wrappers would change every thread of the agent) and then ends: its
credentials end with it. It is a thread of the agent's process, so /proc's magic links
(/proc/self/fd/N: the agent's own files, another user's among them) are never followed
(openat2 RESOLVE_NO_MAGICLINKS), and a container's file is resolved inside its root
(RESOLVE_IN_ROOT). A file on FUSE is refused: its server is the user's, and root would
read through it.
"""

from __future__ import annotations

import ctypes
import os
import platform
import stat
import threading
from collections.abc import Sequence

from adaptyst_top.system.targets import CONTAINER_PATH

# setgroups, setresgid, setresuid: the kernel's per-thread calls.
_SYSCALLS = {"x86_64": (116, 119, 117), "aarch64": (159, 149, 147)}
_OPENAT2 = 437  # the same number on every architecture (Linux 5.6)
_RESOLVE_NO_MAGICLINKS, _RESOLVE_IN_ROOT = 0x02, 0x10
_AT_FDCWD = -100
_FUSE_SUPER_MAGIC = 0x65735546
_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4
# A lookup a user's file system holds up is given up on after this (the thread is left
# to end when it does; it holds nothing of the agent's).
OPEN_TIMEOUT_S = 5.0
_LOCK = threading.Lock()  # one opener at a time: the dumpable flag is the process's


class NotOpened(Exception):
    """Why a path was not opened for the user, in one line."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)


def open_as(uid: int, gid: int, groups: Sequence[int], paths: Sequence[str]) -> list[int | None]:
    """Each of PATHS opened read-only as UID:GID with GROUPS, or None where that user
    could not (missing, hidden, not a regular file, on FUSE, through a magic link).
    NotOpened when the thread cannot become the user, or the opening takes longer than
    OPEN_TIMEOUT_S (then nothing is opened)."""
    calls = _SYSCALLS.get(platform.machine())
    if calls is None:
        raise NotOpened(f"opening files as a user is not written for {platform.machine()}")
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
            if _libc.syscall(call, *args) != 0:
                failed.append(os.strerror(ctypes.get_errno()))
                return
        opened = [_open_regular(p) for p in paths]
        out.extend(opened)

    with _LOCK:
        dumpable = _libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)
        worker = threading.Thread(target=as_user, name="open-as-user", daemon=True)
        worker.start()
        worker.join(OPEN_TIMEOUT_S)
        # Taking a user's ids makes the kernel mark the process not dumpable: as it was.
        if dumpable >= 0:
            _libc.prctl(_PR_SET_DUMPABLE, dumpable, 0, 0, 0)
    if worker.is_alive():
        raise NotOpened(f"opening files as uid {uid} took over {OPEN_TIMEOUT_S:g} s: given up")
    if failed:
        raise NotOpened(f"could not take uid {uid}'s ids to open files: {failed[0]}")
    return out


def _open_regular(path: str) -> int | None:
    """PATH opened for reading if it is a regular file: first without reading it (a FIFO
    or a device is never opened for real), then the inode held reopened."""
    try:
        held = _open_path(path)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    try:
        if not stat.S_ISREG(os.fstat(held).st_mode) or _on_fuse(held):
            return None
        return os.open(f"/proc/self/fd/{held}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    finally:
        os.close(held)


def _open_path(path: str) -> int:
    """An O_PATH descriptor of PATH, never through a magic link; a container's path
    (/proc/PID/root/...) resolved inside that root."""
    inside = CONTAINER_PATH.match(path)
    if inside is None:
        return _openat2(_AT_FDCWD, path, _RESOLVE_NO_MAGICLINKS)
    root = os.open(f"/proc/{inside[1]}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return _openat2(root, inside[2], _RESOLVE_IN_ROOT | _RESOLVE_NO_MAGICLINKS)
    finally:
        os.close(root)


def _openat2(folder: int, path: str, resolve: int) -> int:
    how = _OpenHow(os.O_PATH | os.O_CLOEXEC, 0, resolve)
    fd = _libc.syscall(_OPENAT2, folder, os.fsencode(path), ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(fd)


def _on_fuse(fd: int) -> bool:
    buf = ctypes.create_string_buffer(256)  # struct statfs: f_type first
    if _libc.fstatfs(fd, buf) != 0:
        return True  # unknown: not trusted
    return ctypes.c_long.from_buffer(buf).value == _FUSE_SUPER_MAGIC


__all__ = ["OPEN_TIMEOUT_S", "NotOpened", "open_as"]
