"""Textual's Linux driver without its input thread's 0.1 s poll.

Textual's input thread wakes ten times a second whether or not a key came, only to
time out a lone Escape; on this machine that poll is all an idle Textual app costs
(0.15-0.2% of a core, measured in tmux; with this driver: 0.00% over 40 s). Here the
thread sleeps until a key arrives, until the parser's own Escape deadline when it
holds a partial sequence, or until the driver stops (a byte on a pipe wakes it).

Textual is pinned (pyproject), and the parser's deadline is read from its private
`_timeout_time`; should a later Textual drop it, the thread polls as Textual does.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import sys
import tempfile
import threading
from codecs import getincrementaldecoder
from typing import IO, Any

from textual._time import get_time
from textual._xterm_parser import XTermParser
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver

from adaptyst_top.snapshot.inert import inert

POLL_S = 0.1  # Textual's own period, used when the parser's deadline can't be read
SAID_LINES = 20  # of what was written to descriptor 2 while the screen was up
SAID_MAX = 64 << 10
SAID_HEADER = "adaptyst-top: written to stderr while the screen was up (last lines):"


class _WakingEvent(threading.Event):
    """An Event whose set() also writes a byte to a pipe, so that a select() waiting
    on the pipe's other end returns."""

    def __init__(self, write_fd: int) -> None:
        super().__init__()
        self.write_fd = write_fd  # -1 once closed: its number may be reused

    def set(self) -> None:
        super().set()
        if self.write_fd >= 0:
            with contextlib.suppress(OSError):  # full of unread wake-ups: awake anyway
                os.write(self.write_fd, b"!")


class QuietLinuxDriver(LinuxDriver):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._wake_r = self._wake_w = -1
        self.exit_event: _WakingEvent = _WakingEvent(-1)
        self._open_wake()
        # The screen is written through a descriptor of its own: while the app runs,
        # descriptor 2 goes to a sink, and what a library prints there (libbcc's
        # "cannot attach uprobe, probe entry may not exist") never lands on the screen.
        if sys.__stderr__ is not None:
            own = os.dup(sys.__stderr__.fileno())
            self._file = open(own, "w", encoding="utf-8")  # noqa: SIM115 - the app's, for its life
        self._stderr_saved = -1
        self._stderr_sink: IO[bytes] | None = None

    def _stderr_to_sink(self) -> None:
        if self._stderr_sink is not None:
            return
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        self._stderr_sink = tempfile.TemporaryFile()  # noqa: SIM115 - closed by _stderr_back
        self._stderr_saved = os.dup(2)
        os.dup2(self._stderr_sink.fileno(), 2)

    def _stderr_back(self) -> None:
        """Descriptor 2 back where it was; what was said meanwhile is said there now,
        once the screen is gone: its last lines, under a line that says what they are."""
        sink, self._stderr_sink = self._stderr_sink, None
        if sink is None:
            return
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(self._stderr_saved, 2)
        os.close(self._stderr_saved)
        size = sink.seek(0, os.SEEK_END)
        sink.seek(max(0, size - SAID_MAX))
        said = sink.read().decode(errors="replace").splitlines()[-SAID_LINES:]
        sink.close()
        if not said:
            return
        text = "\n".join([SAID_HEADER, *map(inert, said), ""])  # shown, never acted on
        if self._writer_thread is not None:
            # Behind the sequences that leave the screen, in the writer thread's queue:
            # written straight to descriptor 2 it could come first (a busy machine) and
            # be painted on the screen being left, which the terminal then throws away.
            self.write(text)
            self.flush()
            return
        with contextlib.suppress(OSError):
            os.write(2, text.encode())

    def _open_wake(self) -> None:
        """The wake-up pipe, anew when close() closed it: Textual's suspend (the cluster
        view's Enter) closes the driver and starts it again, and a thread that then
        waited on the closed pipe's number died with EINVAL and ended the view."""
        if self._wake_r >= 0:
            return
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self.exit_event.write_fd = self._wake_w

    def start_application_mode(self) -> None:
        self._open_wake()
        self._stderr_to_sink()
        super().start_application_mode()  # type: ignore[no-untyped-call]

    def stop_application_mode(self) -> None:
        super().stop_application_mode()
        self._stderr_back()  # before a suspend too: the program run then has the terminal

    def run_input_thread(self) -> None:
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        selector = selectors.DefaultSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        selector.register(self._wake_r, selectors.EVENT_READ)
        try:
            while not self.exit_event.is_set():
                for key, _mask in selector.select(_timeout(parser)):
                    if key.fd == self._wake_r:
                        os.read(self._wake_r, 512)
                        continue
                    try:
                        raw = os.read(self.fileno, 4096)
                    except OSError:  # EIO: the terminal is gone
                        raw = b""
                    if not raw:
                        self._input_ended(selector)
                        continue
                    for event in parser.feed(decode(raw)):
                        self.process_message(event)
                for event in parser.tick():
                    self.process_message(event)
        finally:
            selector.close()

    def _sigcont_application(self, *_: object) -> None:
        """SIGCONT starts application mode again only after a stop this driver made
        (Ctrl+Z). A terminal that hangs up sends SIGCONT with SIGHUP (the kernel does,
        to the foreground group), and `kill -CONT` may reach a process never stopped:
        Textual started a second input thread then, the stop joined only the second,
        and the first kept the process alive after exit (seen here after tmux
        kill-session: spinning on the dead terminal in Textual's driver, asleep on a
        closed pipe in ours)."""
        if self._must_signal_resume:
            super()._sigcont_application()

    def _input_ended(self, selector: selectors.BaseSelector) -> None:
        """Nothing more can be read: select() would say so at once, for ever (Textual's
        thread spins there until the app ends). A terminal that hung up ends the app
        as SIGHUP does, in case the signal never came (a closed SSH session sends it;
        not every way of losing a terminal does)."""
        selector.unregister(self.fileno)
        if os.isatty(self.fileno) or _hung_up(self.fileno):
            with contextlib.suppress(RuntimeError):  # the loop has closed: it is ending
                self._loop.call_soon_threadsafe(self._app.exit)

    def close(self) -> None:
        super().close()
        self.exit_event.write_fd = -1
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._wake_r = self._wake_w = -1


_UNKNOWN = object()


def _hung_up(fd: int) -> bool:
    # isatty() is False for a terminal that has hung up on some kernels: ask the tty.
    try:
        os.ttyname(fd)
    except OSError as exc:
        return exc.errno == errno.EIO
    return True


def _timeout(parser: XTermParser) -> float | None:
    """How long the input thread may sleep: until the parser's Escape deadline, or
    until input comes when it holds nothing partial."""
    deadline = getattr(parser, "_timeout_time", _UNKNOWN)
    if deadline is None:
        return None
    if not isinstance(deadline, float):
        return POLL_S
    return max(0.0, deadline - get_time())  # the parser's own clock


def quiet(driver_class: type[Driver]) -> type[Driver]:
    """The driver an app should run with: this one where Textual would pick its Linux
    driver (not when TEXTUAL_DRIVER names another, nor headless or inline)."""
    return QuietLinuxDriver if driver_class is LinuxDriver else driver_class
