"""The signals that end the monitor like q, and how a running app takes them.

No Textual import at run time: the command line reads QUIT_SIGNALS before any app
exists (`adaptyst-top` starts fast, and Ctrl-C works early)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.app import App

# A kill, a closed SSH session, an interrupt.
QUIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
# How long a quit may take before the last resort: Textual's shutdown once hung on a
# terminal taken away under stock rendering (tmux kill-session), probes still attached.
QUIT_GRACE_S = 10.0

_last_resort: list[Callable[[], None]] = []  # what must run before the process goes
_deadline_started = threading.Event()


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


def quit_on_signals(app: App[Any]) -> None:
    """QUIT_SIGNALS end APP like q, taken inside its event loop: a Python handler runs
    between any two bytecodes of the main thread, and an exit() posted from there may
    find the loop's own queues mid-update. When the loop closes, asyncio puts the
    default actions back: a caller with work to do after run() installs its own
    handlers again."""
    loop = asyncio.get_running_loop()

    def quit_now() -> None:
        start_quit_deadline()
        app.exit()

    for sig in QUIT_SIGNALS:
        with contextlib.suppress(RuntimeError, ValueError):  # not the main thread
            loop.add_signal_handler(sig, quit_now)
