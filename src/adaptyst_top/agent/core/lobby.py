"""Connections that have not said hello yet, held by the accept loop rather than a thread
each. A connect flood (connect, close, again) then costs the agent an accept and a peek
per connection, and another user's hello is not queued behind it: with a thread per
connection, two users' floods held each hello 1.3-2.1 s on an idle machine (the kernel's
4,096-deep queue drained at ~2,500 threads a second) and past 5 s beside two busy loops."""

from __future__ import annotations

import contextlib
import errno
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from adaptyst_top.runtime.remote import protocol as proto

T = TypeVar("T")

# At most this many accepts before the lobby is looked at again: a flood faster than the
# accept loop cannot keep the hellos already waiting from being read.
ACCEPT_BATCH = 256
# Out of descriptors (EMFILE, ENFILE), the listening socket stays readable: accepting
# pauses this long rather than spin on it (those queued wait, none is refused).
FULL_PAUSE_S = 0.1


def accept_some(sock: socket.socket, admit: Callable[[socket.socket], None]) -> bool:
    """Up to ACCEPT_BATCH connections of SOCK (non-blocking) to ADMIT; False when the
    process is out of descriptors (pause before the next try)."""
    for _ in range(ACCEPT_BATCH):
        try:
            conn, _ = sock.accept()
        except OSError as exc:  # none left, a client that gave up, stop(), or full
            return exc.errno not in (errno.EMFILE, errno.ENFILE)
        admit(conn)
    return True


class ByDeadline:
    """CONN's recv, each given what is left until BY: a hello sent a byte at a time
    still ends at its deadline, where a socket timeout would wait per byte."""

    def __init__(self, conn: socket.socket, by: float) -> None:
        self.conn, self.by = conn, by

    def recv(self, size: int) -> bytes:
        left = self.by - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self.conn.settimeout(left)
        return self.conn.recv(size)


def _peek(conn: socket.socket) -> bytes | None:
    """CONN's next byte left unread: b"" once its client has closed (or reset) with
    nothing sent, None while nothing has come."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return None
    except OSError:  # reset
        return b""


def hung_up(conn: socket.socket) -> bool:
    """Whether CONN's client has closed its end and sent nothing (a flood's connection)."""
    return _peek(conn) == b""


@dataclass
class _Waiting(Generic[T]):
    conn: socket.socket
    item: T
    deadline: float


@dataclass
class Sorted(Generic[T]):
    """What looking at the lobby found: who spoke (their hello waits), who left, who
    said nothing by their deadline."""

    spoke: list[tuple[T, float]]  # with the deadline their hello is still due by
    gone: list[T]
    late: list[T]


class Lobby(Generic[T]):
    """ITEMs (clients) by their connections, each until it speaks, leaves or is late."""

    def __init__(self) -> None:
        self._waiting: dict[int, _Waiting[T]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, conn: socket.socket, item: T, within_s: float) -> None:
        self._waiting[conn.fileno()] = _Waiting(conn, item, time.monotonic() + within_s)

    def fds(self) -> list[int]:
        return list(self._waiting)

    def wait_s(self, longest: float) -> float:
        """How long the accept loop may wait before someone here is late."""
        if not self._waiting:
            return longest
        first = min(w.deadline for w in self._waiting.values())
        return max(0.0, min(longest, first - time.monotonic()))

    def sort(self, ready: list[int]) -> Sorted[T]:
        """Those of READY (readable descriptors) that spoke or left, and those late."""
        found: Sorted[T] = Sorted([], [], [])
        for fd in ready:
            w = self._waiting.get(fd)
            if w is None:
                continue
            peeked = _peek(w.conn)
            if peeked is None:
                continue  # woken for nothing
            del self._waiting[fd]
            if peeked:
                found.spoke.append((w.item, w.deadline))
            else:
                found.gone.append(w.item)
        now = time.monotonic()
        for fd, w in list(self._waiting.items()):
            if w.deadline <= now:
                del self._waiting[fd]
                found.late.append(w.item)
        return found

    def close_all(self) -> None:
        for w in self._waiting.values():
            w.conn.close()
        self._waiting.clear()


def turn_away(conn: socket.socket, why: str) -> None:
    """WHY sent if the buffer has room (never waited for), and CONN closed."""
    with contextlib.suppress(OSError):
        conn.setblocking(False)
        conn.send(proto.encode("error", message=why))
    conn.close()
