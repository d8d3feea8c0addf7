"""What the add-probe picker offers for a running process: the functions of the
executable and of every library it maps, and their USDT probes."""

from __future__ import annotations

import subprocess
import sys
import time
import types

from adaptyst_top.collectors.targets import mapped_files
from adaptyst_top.runtime.sources import LiveSource


def test_the_picker_offers_the_libraries_a_process_maps() -> None:
    # A Python interpreter maps libc, libm and the rest; its own binary comes first.
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 10
        while len(mapped_files(proc.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        files = mapped_files(proc.pid)
        session = types.SimpleNamespace(remote=None, pid=proc.pid, child=None)
        specs = LiveSource(session).candidates()  # type: ignore[arg-type]
        libc = next(f for f in files if "/libc.so" in f or "/libc-" in f)
        assert f"uprobe:{libc}:malloc" in specs
        # Every mapped object contributes; the executable's own come first.
        paths = {s.split(":", 2)[1] for s in specs if s.startswith("uprobe:")}
        assert libc in paths and len(paths) >= 2
        first = {p: min(i for i, s in enumerate(specs) if s.split(":", 2)[1] == p) for p in paths}
        assert files[0] not in first or first[files[0]] == min(first.values())
    finally:
        proc.kill()
        proc.wait()
