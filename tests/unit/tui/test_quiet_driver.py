"""The quiet driver (tui/quiet_driver.py) when its terminal goes."""

from __future__ import annotations

import contextlib
import os
import pty
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from tests.support.paths import REPO

APP = "tests.support.targets.paint_app"


def start_app(tmp_path: Path, ignore_hup: bool = False) -> tuple[subprocess.Popen[bytes], int]:
    """The table app on a pty of its own, and the pty's other end (the terminal)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", APP, str(tmp_path / "counts")],
        cwd=REPO,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=(lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)) if ignore_hup else None,
        env={**os.environ, "COLUMNS": "100", "LINES": "30"},
    )
    os.close(slave)
    os.set_blocking(master, False)
    return proc, master


def test_a_terminal_that_hangs_up_ends_the_app_without_a_signal(tmp_path: Path) -> None:
    """A terminal can go without SIGHUP reaching us (ignored here, as under nohup): the
    input thread reads its end, stops reading (Textual's spun in select at 100% of a
    core) and ends the app, which then exits like q."""
    proc, terminal = start_app(tmp_path, ignore_hup=True)
    try:
        assert _read_until(terminal, b"tick 3")
        os.close(terminal)  # the terminal goes
        assert proc.wait(20) == 0
        assert (tmp_path / "counts").read_text().startswith("direct")
    finally:
        _kill(proc)


def test_sigcont_without_a_stop_leaves_one_input_thread(tmp_path: Path) -> None:
    """A hung-up terminal sends SIGCONT with SIGHUP, and `kill -CONT` can reach a
    process that was never stopped: Textual then started a second input thread, the
    exit joined only that one, and the first kept the process alive for ever."""
    proc, terminal = start_app(tmp_path)
    try:
        assert _read_until(terminal, b"tick 3")
        threads = psutil.Process(proc.pid).num_threads()
        for _ in range(3):
            proc.send_signal(signal.SIGCONT)
            _read_until(terminal, b"never", 0.3)  # the app's output keeps flowing
        assert psutil.Process(proc.pid).num_threads() == threads  # no second input thread
        os.write(terminal, b"q")
        assert _read_until(terminal, b"never", 20, lambda: proc.poll() is not None)
        assert proc.wait(1) == 0
    finally:
        _kill(proc)
        os.close(terminal)


def _read_until(
    fd: int, marker: bytes, timeout: float = 30.0, done: Callable[[], bool] | None = None
) -> bool:
    """Reads the terminal (an app whose output is not read blocks on its next write)
    until MARKER shows, DONE says so, or TIMEOUT."""
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker in seen or (done is not None and done()):
            return True
        time.sleep(0.1)
        with contextlib.suppress(BlockingIOError, OSError):
            seen = (seen + os.read(fd, 65536))[-65536:]
    return False


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        proc.wait()


def _read_for(fd: int, seconds: float, done: Callable[[], bool] | None = None) -> bytes:
    seen = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (done is not None and done()):
        time.sleep(0.05)
        with contextlib.suppress(BlockingIOError, OSError):
            seen += os.read(fd, 65536)
    with contextlib.suppress(BlockingIOError, OSError):
        seen += os.read(fd, 65536)
    return seen


def test_what_a_library_writes_to_stderr_never_reaches_the_screen(tmp_path: Path) -> None:
    """libbcc prints to descriptor 2 ("cannot attach uprobe, probe entry may not exist"),
    which was the screen: its line was painted over a pane's border. While the app runs
    it goes to a sink, and is said after the screen is gone, under a line saying so."""
    from adaptyst_top.tui.quiet_driver import SAID_HEADER

    proc, terminal = start_app(tmp_path)
    try:
        assert _read_until(terminal, b"tick 3")
        os.write(terminal, b"e")
        screen = b""
        deadline = time.monotonic() + 30
        while b"noise said" not in screen and time.monotonic() < deadline:
            screen += _read_for(terminal, 0.2)
        assert b"noise said" in screen  # the app painted after the noise was written
        assert b"NOISE" not in screen
        os.write(terminal, b"q")
        after = _read_for(terminal, 20, lambda: proc.poll() is not None)
        assert proc.wait(5) == 0
        # What the app wrote as it ended reaches this end of the pty a moment later (the
        # kernel hands it over from a work queue: on a busy machine, after the exit).
        deadline = time.monotonic() + 10
        while b"NOISE-FROM-A-C-LIBRARY" not in after and time.monotonic() < deadline:
            after += _read_for(terminal, 0.2)
        said = after[after.rindex(b"\x1b[?1049l") :]  # after the screen is left
        assert SAID_HEADER.encode() in said and b"NOISE-FROM-A-C-LIBRARY" in said, said
    finally:
        _kill(proc)
        os.close(terminal)
