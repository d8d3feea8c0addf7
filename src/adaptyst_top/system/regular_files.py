"""Opening a file at a path someone else may have prepared (a debug file beside a user's
binary, a source file a target's memory names): looked at first without following a last
symbolic link (O_PATH, which opens nothing), and opened only when it is a regular file
of a sane size, on a filesystem of stored files, through that very handle. A device
(whose open alone acts: a watchdog), a FIFO (whose open blocks), a kernel interface that
calls itself a regular file (/proc/kmsg, tracefs' trace_pipe: a read waits for the
kernel, or drains what others are owed) and a FUSE file (a user's daemon answers its
reads, or never does) are never opened. The agent's user worker has its own opener
(agent/worker/open_files.py, which also stays in a container's root and off FUSE)."""

from __future__ import annotations

import os
import stat

# Filesystems whose "regular files" are the kernel's or a daemon's interfaces, not data.
_NOT_STORED = frozenset(
    {
        "proc",
        "sysfs",
        "tracefs",
        "debugfs",
        "securityfs",
        "bpf",
        "cgroup",
        "cgroup2",
        "configfs",
        "pstore",
        "efivarfs",
        "fusectl",
        "devpts",
        "mqueue",
        "binfmt_misc",
        "autofs",
        "rpc_pipefs",
        "nsfs",
        "selinuxfs",
        "devtmpfs",
    }
)
_MOUNTINFO_MAX = 1 << 22


def _filesystem(handle: int) -> str | None:
    """The type of the filesystem HANDLE lies on (its mount, by the id the kernel gives
    in fdinfo), or None when it cannot be told."""
    try:
        with open(f"/proc/self/fdinfo/{handle}", "rb") as f:
            info = f.read(4096)
        mnt = next(
            line.split(b":", 1)[1].strip()
            for line in info.splitlines()
            if line.startswith(b"mnt_id:")
        )
        with open("/proc/self/mountinfo", "rb") as f:
            mounts = f.read(_MOUNTINFO_MAX)
    except (OSError, StopIteration):
        return None
    for line in mounts.splitlines():
        if line.split(b" ", 1)[0] == mnt and b" - " in line:
            return line.split(b" - ", 1)[1].split(b" ", 1)[0].decode(errors="replace")
    return None


def stored(handle: int) -> bool:
    """Whether HANDLE's file is data a filesystem stores (not a kernel's or a daemon's
    interface that only looks like a file)."""
    kind = _filesystem(handle)
    return kind is not None and kind not in _NOT_STORED and not kind.startswith("fuse")


def open_regular_file(path: str, max_bytes: int) -> tuple[int, os.stat_result] | None:
    """A read-only descriptor of PATH and what it is, or None when PATH is not a regular
    file of at most MAX_BYTES (or cannot be opened)."""
    try:
        handle = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    try:
        st = os.fstat(handle)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes or not stored(handle):
            return None
        # Non-blocking: what a stored file ignores, and what keeps any other from waiting.
        flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK
        return os.open(f"/proc/self/fd/{handle}", flags), st
    except OSError:
        return None
    finally:
        os.close(handle)
