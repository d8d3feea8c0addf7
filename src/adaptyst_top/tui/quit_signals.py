"""The signals that end the monitor like q, and how a running app takes them.

No Textual import at run time: the command line reads QUIT_SIGNALS before any app
exists (`adaptyst-top` starts fast, and Ctrl-C works early)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.app import App

# A kill, a closed SSH session, an interrupt.
QUIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def quit_on_signals(app: App[Any]) -> None:
    """QUIT_SIGNALS end APP like q, taken inside its event loop: a Python handler runs
    between any two bytecodes of the main thread, and an exit() posted from there may
    find the loop's own queues mid-update. When the loop closes, asyncio puts the
    default actions back: a caller with work to do after run() installs its own
    handlers again."""
    loop = asyncio.get_running_loop()
    for sig in QUIT_SIGNALS:
        with contextlib.suppress(RuntimeError, ValueError):  # not the main thread
            loop.add_signal_handler(sig, app.exit)
