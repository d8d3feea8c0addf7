"""The stop flag signal handlers set (runtime/stop_flag.py): what threading.Event did
wrong, measured, and the Event calls it stands in for."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time

from adaptyst_top.runtime.stop_flag import StopFlag

# The main thread waits on the flag in a loop while another thread signals it thousands
# of times a second and the handler sets the flag. With threading.Event in its place
# this fails within seconds here (3 of 3 runs: the handler waits on the lock its own
# thread holds inside wait(), and the next signals nest until RecursionError).
RACE = """
import signal, sys, threading, time
from adaptyst_top.runtime.stop_flag import StopFlag
flag = StopFlag()
main = threading.get_ident()
signal.signal(signal.SIGUSR1, lambda *_: flag.set())
done = False
def shoot():
    while not done:
        signal.pthread_kill(main, signal.SIGUSR1)
        time.sleep(0.0002)
threading.Thread(target=shoot, daemon=True).start()
end = time.monotonic() + 3
while time.monotonic() < end:
    flag.wait(0.0005)
done = True
print("ok")
"""


def test_a_signal_handler_may_set_it_while_the_main_thread_waits_on_it() -> None:
    r = subprocess.run(
        [sys.executable, "-c", RACE], capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr[-2000:]


def test_wait_returns_on_set_or_after_its_timeout() -> None:
    flag = StopFlag()
    t0 = time.monotonic()
    assert flag.wait(0.1) is False and time.monotonic() - t0 >= 0.1
    threading.Timer(0.05, flag.set).start()
    assert flag.wait() is True and flag.is_set()
    assert flag.wait(0) is True  # set stays set


def test_its_pipe_goes_with_it() -> None:
    def pipes() -> set[str]:
        # By inode, not by count: other threads of this process may open files meanwhile.
        out = set()
        for fd in os.listdir("/proc/self/fd"):
            try:
                out.add(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                continue
        return {t for t in out if t.startswith("pipe:")}

    before = pipes()
    flags = [StopFlag() for _ in range(50)]
    theirs = pipes() - before
    assert len(theirs) == 50  # one pipe each, both ends
    del flags
    gc.collect()
    assert not theirs & pipes()
