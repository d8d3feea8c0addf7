"""Run a function in a forked child as another user (root only): what a real local user
would see, without a second interpreter."""

from __future__ import annotations

import os
from collections.abc import Callable


def run_as(uid: int, fn: Callable[[], bytes]) -> tuple[int, bytes]:
    """(exit code, what FN returned or the exception it raised) from a child that became
    UID (and its group) before calling FN. Never returns into pytest in the child."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.write(w, fn())
            code = 0
        except BaseException as exc:
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
