"""Snapshots taken on a thread of their own and handed to the interface.

One long-lived thread where a Textual timer used to start a thread worker every tick
and wait on a future for the interface to take the result: a worker per tick posts
its state changes (pending, running, success) to the app, and the hand-off blocks the
worker until the event loop has run it. Here a tick is one snapshot and one message
posted without waiting (`App.post_message` is thread-safe)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

JOIN_S = 10.0  # close() waits this long for a snapshot under way (a few ms as a rule)


class SnapshotFeed(Generic[T]):
    """TAKE() every PERIOD seconds (the first at once), or when kicked, each result to
    DELIVER; none while PAUSED() is true. A result of None ends the feed (a replay's
    end); FAIL gets the one-line reason when TAKE raises, and the feed goes on."""

    def __init__(
        self,
        take: Callable[[], T | None],
        deliver: Callable[[T | None], object],
        period: float,
        paused: Callable[[], bool] = lambda: False,
        fail: Callable[[str], object] = lambda _why: None,
    ) -> None:
        self._take, self._deliver, self._paused, self._fail = take, deliver, paused, fail
        self.period = period
        self._wake = threading.Event()
        self._kicked = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="snapshot-feed", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last = float("-inf")  # when the last snapshot was taken: the first is due now
        while not self._closed:
            now = time.monotonic()
            if (self._kicked or now >= last + self.period) and not self._paused():
                self._kicked = False
                last = now
                try:
                    snap = self._take()
                except Exception as exc:  # a source's bug must not end the monitor
                    self._fail(_one_line(exc))
                    continue
                if self._closed:
                    return
                self._deliver(snap)
                if snap is None:
                    return
            elif now >= last + self.period:
                last = now  # paused: look again one period on
            self._wake.wait(max(0.0, last + self.period - time.monotonic()))
            self._wake.clear()

    def kick(self) -> None:
        """A snapshot now (after a toggle, say), then every period from it."""
        self._kicked = True
        self._wake.set()

    def set_period(self, period: float) -> None:
        """The next snapshot one new period after the last one."""
        self.period = period
        self._wake.set()

    def close(self) -> None:
        """Stop; a snapshot under way is waited for, so that nothing reads the source
        after this returns."""
        self._closed = True
        self._wake.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(JOIN_S)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__
