"""Which descriptors can be read, by poll(): select() refuses a descriptor numbered
1024 or more (ValueError), and the agent raises its limit to the hard one, so a busy
agent's newer sockets and pipes (users' connections, workers' links, a session's stop
pipe) are past it."""

from __future__ import annotations

import select
from collections.abc import Sequence
from typing import Protocol

# Readable as select() says it: data, the peer's end, or an error to read.
_EVENTS = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR


class HasFileno(Protocol):
    def fileno(self) -> int: ...


def readable(files: Sequence[int | HasFileno], timeout_s: float | None) -> list[int]:
    """The descriptors of FILES readable within TIMEOUT_S seconds (None: no limit)."""
    poller = select.poll()
    for f in files:
        poller.register(f, _EVENTS)
    ms = None if timeout_s is None else max(0, int(timeout_s * 1000 + 0.999))
    return [fd for fd, _ in poller.poll(ms)]
