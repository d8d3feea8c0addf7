"""Run a function in a forked child as another user (root only): what a real local user
would see, without a second interpreter."""

from __future__ import annotations

import os
from collections.abc import Callable


def become(uid: int, gid: int | None = None) -> None:
    """This process turns into UID (and GID, by default the same number), for good."""
    gid = uid if gid is None else gid
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def run_as(uid: int, fn: Callable[[], bytes]) -> tuple[int, bytes]:
    """(exit code, what FN returned or the exception it raised) from a child that became
    UID (and its group) before calling FN. Never returns into pytest in the child."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            become(uid)
            os.write(w, fn())
            code = 0
        except BaseException as exc:  # SystemExit too: the child never returns into pytest
            os.write(w, repr(exc).encode()[:4000])
        finally:
            os._exit(code)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), data
