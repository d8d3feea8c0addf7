"""One run's life after a quit signal (runtime/run_lifecycle.py): a process whose
shutdown hangs still detaches what it attached and goes; before its session is up, a
signal only cancels."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def test_a_hung_quit_still_cleans_up_and_ends(tmp_path: Path) -> None:
    mark = tmp_path / "cleaned"
    code = textwrap.dedent(f"""
        import threading
        from adaptyst_top.runtime import run_lifecycle as q
        q.QUIT_GRACE_S = 0.5
        q.on_quit_deadline(lambda: open({str(mark)!r}, "w").write("probes detached"))
        q.start_quit_deadline()
        q.start_quit_deadline()  # a second signal starts no second deadline
        threading.Event().wait()  # the shutdown that never ends
    """)
    proc = subprocess.run([sys.executable, "-c", code], timeout=30, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert mark.read_text() == "probes detached"


def test_a_signal_cancels_the_attach_and_arms_the_deadline_only_once_the_session_is_up(
    tmp_path: Path,
) -> None:
    mark = tmp_path / "cleaned"
    code = textwrap.dedent(f"""
        import os, signal, sys, threading, time
        from adaptyst_top.runtime import run_lifecycle as q
        q.QUIT_GRACE_S = 0.3
        cancel = threading.Event()
        told = []
        life = q.RunLifecycle(cancel, told.append)
        life.install()
        os.kill(os.getpid(), signal.SIGTERM)  # while attaching: cancelled, not ended
        time.sleep(0.6)  # past the grace: no deadline runs
        assert cancel.is_set() and life.caught == told == [signal.SIGTERM], told
        close = q.once(lambda: open({str(mark)!r}, "a").write("closed;"))
        life.last_resort(close, close)  # the session is up
        os.kill(os.getpid(), signal.SIGHUP)
        threading.Event().wait()  # a quit that hangs: the deadline ends it
    """)
    proc = subprocess.run([sys.executable, "-c", code], timeout=30, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert mark.read_text() == "closed;"  # once, though named twice
