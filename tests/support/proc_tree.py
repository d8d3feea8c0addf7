"""Every process's parent and real uid, read from /proc (tests and benches: which
workers the agent runs, and as whom)."""

from __future__ import annotations

import os


def parents_and_uids() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, real uid), for the processes that stayed while read."""
    found: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            found[int(name)] = (int(fields["PPid"]), int(fields["Uid"].split()[0]))
        except (OSError, ValueError, KeyError):
            continue  # not a process, or gone meanwhile
    return found
