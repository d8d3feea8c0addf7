"""Opening a file at a path someone else may have prepared (a debug file beside a user's
binary, a source file a target's memory names): looked at first without following a last
symbolic link (O_PATH, which opens nothing), and opened only when it is a regular file
of a sane size, through that very handle. A device (whose open alone acts: a watchdog) or
a FIFO (whose open blocks) is never opened. The agent's user worker has its own opener
(agent/worker/open_files.py, which also stays in a container's root and off FUSE)."""

from __future__ import annotations

import os
import stat


def open_regular_file(path: str, max_bytes: int) -> tuple[int, os.stat_result] | None:
    """A read-only descriptor of PATH and what it is, or None when PATH is not a regular
    file of at most MAX_BYTES (or cannot be opened)."""
    try:
        handle = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    try:
        st = os.fstat(handle)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            return None
        return os.open(f"/proc/self/fd/{handle}", os.O_RDONLY | os.O_CLOEXEC), st
    except OSError:
        return None
    finally:
        os.close(handle)
