"""One command's run, from the signals' side: which signals end it, the cancel of an
attach still under way, cleanup run once whoever runs it first (the main thread at its
end, or the last resort), and the last resort itself when a quit hangs.

`adaptyst-top` (the monitor) and `record` own a run each; what they do on a signal
differs (the app quits like q; record writes its last line) and is theirs to say.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from typing import Protocol

# A kill, a closed SSH session, an interrupt.
QUIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
# How long a quit may take before the last resort: Textual's shutdown once hung on a
# terminal taken away under stock rendering (tmux kill-session), probes still attached.
QUIT_GRACE_S = 10.0

_last_resort: list[Callable[[], None]] = []  # what must run before the process goes
_deadline_started = threading.Event()


class Cancel(Protocol):
    def set(self) -> None: ...


def once(fn: Callable[[], None]) -> Callable[[], None]:
    """FN, run by the first caller only; a second caller waits until it has run."""
    lock = threading.Lock()
    done: list[bool] = []

    def run() -> None:
        with lock:
            if not done:
                done.append(True)
                fn()

    return run


def on_quit_deadline(*cleanup: Callable[[], None]) -> None:
    """CLEANUP (detach the probes, end the command, remove what the run wrote; each safe
    to run twice) runs, in order, if a quit signal's exit has not ended the process
    within QUIT_GRACE_S; then it goes."""
    _last_resort[:] = cleanup


def start_quit_deadline() -> None:
    """After a quit signal: a daemon thread that, QUIT_GRACE_S later, runs the cleanup
    and ends the process (a normal exit ends it first, the thread with it)."""
    if _deadline_started.is_set():
        return
    _deadline_started.set()

    def last_resort() -> None:
        for cleanup in _last_resort:
            with contextlib.suppress(Exception):
                cleanup()
        os._exit(0)

    timer = threading.Timer(QUIT_GRACE_S, last_resort)
    timer.daemon = True
    timer.start()


class RunLifecycle:
    """The quit signals of one run: each sets CANCEL (an attach under way gives up, the
    command never starts), starts the quit deadline once the run has named its last
    resort, and is then told to ON_QUIT (the command's own reaction; it may raise, as a
    handler may). `caught` lists them."""

    def __init__(self, cancel: Cancel, on_quit: Callable[[int], None] | None = None) -> None:
        self.cancel = cancel
        self.on_quit = on_quit
        self.caught: list[int] = []
        self.armed = False  # a last resort named: a quit signal starts the deadline

    def install(self) -> None:
        """The handlers, in the main thread: before attaching (a signal then must not
        release a command with no probes), and again after anything that put the
        default actions back (an app's event loop as it closes)."""
        for sig in QUIT_SIGNALS:
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: object) -> None:
        self.caught.append(signum)
        self.cancel.set()
        if self.armed:
            start_quit_deadline()
        if self.on_quit is not None:
            self.on_quit(signum)

    def last_resort(self, *cleanup: Callable[[], None]) -> None:
        """What the quit deadline runs before the process goes (on_quit_deadline), named
        once the session is up: before, a signal only cancels the attach, and the run
        ends by its own path (a last resort then could leave the command running)."""
        on_quit_deadline(*cleanup)
        self.armed = True
