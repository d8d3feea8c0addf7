"""The last resort after a quit signal (tui/quit_signals.py): a process whose shutdown
hangs still detaches what it attached and goes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def test_a_hung_quit_still_cleans_up_and_ends(tmp_path: Path) -> None:
    mark = tmp_path / "cleaned"
    code = textwrap.dedent(f"""
        import threading
        from adaptyst_top.tui import quit_signals as q
        q.QUIT_GRACE_S = 0.5
        q.on_quit_deadline(lambda: open({str(mark)!r}, "w").write("probes detached"))
        q.start_quit_deadline()
        q.start_quit_deadline()  # a second signal starts no second deadline
        threading.Event().wait()  # the shutdown that never ends
    """)
    proc = subprocess.run([sys.executable, "-c", code], timeout=30, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert mark.read_text() == "probes detached"
