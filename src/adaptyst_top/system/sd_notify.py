"""systemd's notify protocol (sd_notify(3)): READY=1 once the service answers, then
WATCHDOG=1 while it is well, so that systemd restarts an agent that is stopped or wedged
(WatchdogSec=). A datagram to $NOTIFY_SOCKET; nothing at all when systemd did not ask."""

from __future__ import annotations

import contextlib
import os
import socket
import time


class Notifier:
    """The service's side. Built from the environment systemd sets; every call is a
    no-op without $NOTIFY_SOCKET, and never raises (a lost datagram is systemd's to see)."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        where = env.get("NOTIFY_SOCKET", "")
        # An abstract socket is written '@name'; the kernel's name starts with a NUL.
        self.address = "\0" + where[1:] if where.startswith("@") else where
        self.period_s = _watchdog_period(env)
        self._fed = 0.0
        if environ is None:
            for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
                os.environ.pop(name, None)  # not inherited by what the agent starts

    def send(self, state: str) -> None:
        if not self.address:
            return
        with (
            contextlib.suppress(OSError),
            socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s,
        ):
            s.sendto(state.encode(), self.address)

    def ready(self) -> None:
        self.send("READY=1")

    def wake_s(self, longest: float) -> float:
        """How long the fed loop may wait between feeds: a quarter period, or LONGEST."""
        return longest if self.period_s is None else min(longest, self.period_s / 4)

    def feed(self) -> None:
        """WATCHDOG=1, at most four times a period: from the loop that must stay alive."""
        if self.period_s is None:
            return
        now = time.monotonic()
        if now - self._fed >= self.period_s / 4:
            self._fed = now
            self.send("WATCHDOG=1")

    def stopping(self) -> None:
        self.send("STOPPING=1")


def _watchdog_period(env: dict[str, str] | os._Environ[str]) -> float | None:
    """WatchdogSec in seconds when it is meant for this process, else None."""
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
        pid = env.get("WATCHDOG_PID")
        if usec <= 0 or (pid is not None and int(pid) != os.getpid()):
            return None
    except ValueError:
        return None
    return usec / 1e6
