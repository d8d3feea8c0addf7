"""The quiet driver (tui/quiet_driver.py) when its terminal goes."""

from __future__ import annotations

import contextlib
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

APP = Path(__file__).parent / "targets" / "paint_app.py"


def test_a_terminal_that_hangs_up_ends_the_app_without_a_signal(tmp_path: Path) -> None:
    """A terminal can go without SIGHUP reaching us (ignored here, as under nohup): the
    input thread reads its end, stops reading (Textual's spun in select at 100% of a
    core) and ends the app, which then exits like q."""
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    proc = subprocess.Popen(
        [sys.executable, str(APP), str(tmp_path / "counts")],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
        env={**os.environ, "COLUMNS": "100", "LINES": "30"},
    )
    os.close(slave)
    try:
        seen = b""
        deadline = time.monotonic() + 30
        while b"tick 3" not in seen and time.monotonic() < deadline:
            time.sleep(0.1)
            with contextlib.suppress(BlockingIOError):
                seen += os.read(master, 65536)
        assert b"tick 3" in seen
        os.close(master)  # the terminal goes
        assert proc.wait(20) == 0
        assert (tmp_path / "counts").read_text().startswith("direct")
    finally:
        if proc.poll() is None:
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
            proc.kill()
            proc.wait()
