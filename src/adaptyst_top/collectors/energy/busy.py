"""The node's busy CPU time: what every split of the CPU's energy divides by (per probe
row, per job, per Dask run), read in one place."""

from __future__ import annotations

import os


def system_busy_ns() -> int:
    """All CPUs' non-idle time, in ns: the denominator for binary-wide probes."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")
