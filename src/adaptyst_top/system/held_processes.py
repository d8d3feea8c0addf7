"""The probed processes, each held by an open /proc/PID folder from its check onward.

A PID names whichever process has it now: after a probed process exits, its PID can
be another user's within the same clock tick, so neither the PID nor the PID and its
start time (in ticks) say which process a read reaches. A folder of /proc opened while
the process was the one checked keeps naming that process: a file opened through it
belongs to that process, or the open fails once it has exited.
"""

from __future__ import annotations

import contextlib
import os
import threading

from adaptyst_top.system.targets import process_start


class HeldProcesses:
    def __init__(self) -> None:
        self._dirs: dict[int, int] = {}
        self._lock = threading.Lock()  # a leaf lock: nothing is called while it is held

    def hold(self, pid: int, start: int) -> bool:
        """Hold PID if it is still the process that started at START."""
        try:
            folder = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return False
        if process_start(pid, folder) != start:
            os.close(folder)
            return False
        with self._lock:
            old = self._dirs.pop(pid, None)
            self._dirs[pid] = folder
        if old is not None:
            os.close(old)
        return True

    def opened(self, pid: int, name: str) -> int | None:
        """/proc/PID/NAME of the process held, read-only; None if it is not held or has
        exited (whatever has its PID now)."""
        with self._lock:
            folder = self._dirs.get(pid)
            if folder is None:
                return None
            try:
                return os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=folder)
            except OSError:
                return None

    def alive(self, pid: int) -> bool:
        """Whether PID is held and its process has not exited."""
        fd = self.opened(pid, "stat")
        if fd is None:
            return False
        os.close(fd)
        return True

    def release(self, pid: int) -> None:
        with self._lock:
            folder = self._dirs.pop(pid, None)
        if folder is not None:
            os.close(folder)

    def release_all(self) -> None:
        with self._lock:
            folders, self._dirs = list(self._dirs.values()), {}
        for folder in folders:
            with contextlib.suppress(OSError):
                os.close(folder)
