"""The per-user opener: a process of its own, exec'd fresh by the agent for one user, that
opens the files the user names with that user's rights only and hands the descriptors
back over SCM_RIGHTS; it serves that user's requests in turn and exits after IDLE_S
without one.

Run as `python -I -S open_files.py FD` (standard library only: no site, no package
import, nothing of the agent's memory); its first message says whose it is, and may
come long after it started (a spare, agent/core/kept_workers.py). It starts as root, and before it
reads a byte of a request it takes the user's groups, gid and uid for good (real,
effective and saved), which drops every capability, sets no_new_privs and makes itself
not dumpable (at fs.suid_dumpable=1 the user could otherwise ptrace it and answer in
its name). The user may stop or kill it, and gains nothing: it holds only what the
user could open. The agent believes nothing it says: it
checks every descriptor it receives again (agent/core/opener.py).

Each path is looked up by the kernel for that user (folders, ACLs, LSMs), never through
a /proc magic link (RESOLVE_NO_MAGICLINKS), a container's path inside that container's
root (RESOLVE_IN_ROOT); only a regular file off FUSE is opened, and a FIFO or a device is
never opened for real (O_PATH first).
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import json
import os
import re
import select
import socket
import stat
import sys

_OPENAT2 = 437  # the same number on every architecture (Linux 5.6)
_RESOLVE_NO_MAGICLINKS, _RESOLVE_IN_ROOT = 0x02, 0x10
_AT_FDCWD = -100
_FUSE_SUPER_MAGIC = 0x65735546
_PR_GET_DUMPABLE, _PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS = 3, 4, 38
_CONTAINER_PATH = re.compile(r"^/proc/([1-9][0-9]*)/root(/.*)$")
MAX_REQUEST = 1 << 20  # bytes of one request (paths)
IDLE_S = 5.0  # an opener that is asked nothing for this long exits
MAX_PATHS = 256
FDS_PER_MESSAGE = 200  # under the kernel's SCM_MAX_FD (253)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)


def become(uid: int, gid: int, groups: list[int]) -> None:
    """Take UID:GID with GROUPS for good, or exit: nothing is done half-dropped."""
    # The first the kernel kills when the agent's cgroup runs out of memory: a user's
    # workers, never the agent every user's sessions live in.
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")
    os.setgroups(groups)
    os.setresgid(gid, gid, gid)
    # The change of uid makes the process dumpable as fs.suid_dumpable says (at 1, the
    # user could ptrace it, take its socket and answer in its name) until it says not:
    # the saved uid stays root's over that window, so the kernel's ptrace check (all
    # three uids the caller's) fails for the user, whatever their gid (0 too); the uid
    # is taken for good after, which ends the capabilities still permitted.
    os.setresuid(uid, uid, 0)
    if _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        sys.exit(3)
    os.setresuid(uid, uid, uid)  # the saved uid alone: dumpable stays 0
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        sys.exit(3)
    if _libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) != 0:
        sys.exit(3)
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        sys.exit(3)
    with open("/proc/self/status") as f:
        for line in f:
            # A user's opener keeps no capability (root's own opens are root's).
            capability = line.startswith(("CapPrm:", "CapEff:", "CapAmb:")) and line.split()[1]
            if uid != 0 and capability and int(capability, 16):
                sys.exit(3)
    # No PR_SET_PDEATHSIG: it fires when the thread that started the process ends (one
    # client's), which ended openers kept for the next request. The agent's death
    # closes its end of the socket instead: the opener reads the end and exits.


def open_regular(path: str) -> int | None:
    """PATH opened read-only if it is a regular file off FUSE, else None."""
    try:
        held = _open_path(path)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    try:
        if not stat.S_ISREG(os.fstat(held).st_mode) or on_fuse(held):
            return None
        return os.open(f"/proc/self/fd/{held}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    finally:
        os.close(held)


def _open_path(path: str) -> int:
    inside = _CONTAINER_PATH.match(path)
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


def on_fuse(fd: int) -> bool:
    buf = ctypes.create_string_buffer(256)  # struct statfs: f_type first
    if _libc.fstatfs(fd, buf) != 0:
        return True  # unknown: not trusted
    return ctypes.c_long.from_buffer(buf).value == _FUSE_SUPER_MAGIC


def asked(link: socket.socket, seconds: float) -> bool:
    """Whether LINK has a request (or its end) within SECONDS. poll(), not select():
    the descriptor is the number it had in the agent, past 1024 once the agent holds
    many (select() refused it, and every worker started then died on its first wait)."""
    poller = select.poll()
    poller.register(link, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(poller.poll(int(seconds * 1000)))


def serve(link: socket.socket) -> None:
    """Requests until IDLE_S pass without one, or the agent closes its end."""
    while asked(link, IDLE_S):
        data = link.recv(MAX_REQUEST)
        if not data:
            return
        answer(link, json.loads(data))


def answer(link: socket.socket, request: dict[str, object]) -> None:
    """One request: {"paths": [...]}; answered with one message per FDS_PER_MESSAGE
    paths, {"opened": [bool, ...]} and the opened ones' descriptors in order."""
    paths = request["paths"]
    if not isinstance(paths, list) or len(paths) > MAX_PATHS:
        sys.exit(4)
    for start in range(0, max(1, len(paths)), FDS_PER_MESSAGE):
        chunk = [p if isinstance(p, str) else "" for p in paths[start : start + FDS_PER_MESSAGE]]
        fds = [open_regular(p) for p in chunk]
        opened = [fd for fd in fds if fd is not None]
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", opened))]
        link.sendmsg([json.dumps({"opened": [fd is not None for fd in fds]}).encode()], rights)
        for fd in opened:
            os.close(fd)


def main(argv: list[str]) -> None:
    link = socket.socket(fileno=int(argv[1]))
    # Whose opener this is comes first, from the agent, read while still root (no user
    # can reach this process yet); not in argv, where every user would see it.
    ids = json.loads(link.recv(MAX_REQUEST))
    become(int(ids["uid"]), int(ids["gid"]), [int(g) for g in ids["groups"]])
    os.chdir("/")
    serve(link)


if __name__ == "__main__":
    main(sys.argv)
