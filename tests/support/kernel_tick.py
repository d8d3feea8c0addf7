"""The running kernel's scheduler tick, for bounds that a tick can move (the on-CPU
clock of a call that moved CPUs is read from the run time's growth, off by up to a tick
on each side: collectors/probes/cost/oncpu.py)."""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

LARGEST_TICK_NS = 10_000_000  # CONFIG_HZ=100, where the kernel does not say


def tick_ns() -> int:
    """1e9 / CONFIG_HZ, from /proc/config.gz or /boot's config; the largest tick Linux
    builds with where neither is there."""
    for path in (Path("/proc/config.gz"), Path(f"/boot/config-{os.uname().release}")):
        try:
            raw = path.read_bytes()
            text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode()
        except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError):
            continue
        if m := re.search(r"^CONFIG_HZ=(\d+)$", text, re.M):
            return 1_000_000_000 // int(m.group(1))
    return LARGEST_TICK_NS
