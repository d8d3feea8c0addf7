"""How a running app takes the signals that end the monitor like q (the run's side of
them: runtime/run_lifecycle.py)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from adaptyst_top.runtime.run_lifecycle import QUIT_SIGNALS, start_quit_deadline

if TYPE_CHECKING:
    from textual.app import App


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
