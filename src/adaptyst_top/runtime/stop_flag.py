"""A stop flag that a signal handler may set.

`threading.Event.set()` takes the lock that `Event.wait()` holds for a moment as it
wakes; a handler runs in the main thread between two bytecodes, so a handler that sets
an Event the main thread is waiting on can land in that moment and wait for ever on a
lock its own thread holds. Seen: `record --interval 0.2` hung after SIGTERM, its main
thread in `on_signal -> Event.set -> Condition.__enter__`, inside `Event.wait`. Here
set() stores a flag and writes a byte to a pipe, and wait() polls the pipe: no
lock anywhere.
"""

from __future__ import annotations

import contextlib
import os
import time
import weakref

from adaptyst_top.system.readable import readable


class StopFlag:
    """set / is_set / wait as threading.Event has them (no clear: a stop is final)."""

    def __init__(self) -> None:
        self._set = False
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        # Sessions come and go in a long-lived agent: the pipe goes with its flag.
        weakref.finalize(self, _close, self._read, self._write)

    def set(self) -> None:
        self._set = True
        with contextlib.suppress(OSError):  # full of earlier wake-ups: woken already
            os.write(self._write, b"!")

    def is_set(self) -> bool:
        return self._set

    def fileno(self) -> int:
        """Readable once set (for a poll() that waits on other files too)."""
        return self._read

    def wait(self, timeout: float | None = None) -> bool:
        """True once set; else after TIMEOUT seconds (None: until set), False."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._set:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            readable([self._read], left)  # a byte stays: later waits return
        return self._set


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
