"""The files a session may read, held open from the moment they were checked: the
agent opens each file a user's spec names as that user, and the engine reads its
symbols and attaches its probes through that descriptor (/proc/self/fd/N), never
through the path again."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from adaptyst_top.system.targets import TargetError


class PinnedFiles:
    """Spec targets (as the spec names them) and the descriptors opened for them."""

    def __init__(self, read: Callable[[str], Any] | None = None) -> None:
        # How the engine parses these files (the agent's: in its user's worker); None:
        # in the engine's own process.
        self.read = read
        self._fds: dict[str, tuple[int, str]] = {}
        self._lock = threading.Lock()
        self._closed = False
        # Set by the engine that reads them: from then on only it closes them (its
        # worker may outlive a failed open, and a number closed early is reused).
        self.handed_over = False

    def pin(self, target: str, fd: int, path: str) -> None:
        """Hold FD for TARGET, the file at PATH as it was checked (a descriptor held for
        it already is kept: the first check stands, and the engine may be reading it)."""
        with self._lock:
            if self._closed or target in self._fds:
                os.close(fd)
                return
            self._fds[target] = (fd, path)

    def source(self, target: str) -> tuple[str, str]:
        """(the file's path as it was checked, the path that reads that very file).
        TargetError when TARGET was never checked for this session."""
        with self._lock:
            held = self._fds.get(target)
        if held is None:
            raise TargetError(f"{target}: not checked for this session")
        return held[1], f"/proc/self/fd/{held[0]}"

    def close(self) -> None:
        with self._lock:
            fds, self._fds, self._closed = list(self._fds.values()), {}, True
        for fd, _ in fds:
            os.close(fd)
