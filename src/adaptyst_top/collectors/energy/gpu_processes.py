"""Which GPU processes a user may see. NVML lists every user's processes on a GPU (their
PIDs, memory and SM share) to anyone; a user is shown their own, and the others only as
a count and their memory together, as nvidia-smi shows them to a user. The same rule for
the monitor's own collector and for what the agent (root) serves each user."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from typing import Any

from adaptyst_top.snapshot import DeviceReading


def owner_of(pid: int) -> int:
    """PID's owner, or -1 (gone, hidden by hidepid, or in another PID namespace)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return -1


def split_for(
    procs: Iterable[dict[str, Any]], uid: int
) -> tuple[list[dict[str, Any]], dict[str, int] | None]:
    """(UID's own processes, the others as {count, mem_bytes} or None when none)."""
    mine: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for p in procs:
        (mine if owner_of(int(p["pid"])) == uid else others).append(p)
    if not others:
        return mine, None
    return mine, {
        "count": len(others),
        "mem_bytes": sum(int(p.get("mem_bytes") or 0) for p in others),
    }


def visible_to(devices: Sequence[DeviceReading], uid: int) -> tuple[DeviceReading, ...]:
    """DEVICES as UID may see them (readings with processes copied, never changed)."""
    out = []
    for d in devices:
        procs = d.extra.get("processes")
        if not isinstance(procs, list):
            out.append(d)
            continue
        mine, others = split_for(procs, uid)
        before = d.extra.get("processes_of_others") or {"count": 0, "mem_bytes": 0}
        # idle_j with the device's energy and one's own would give the others' joules.
        extra = {k: v for k, v in d.extra.items() if k not in ("processes_of_others", "idle_j")}
        extra["processes"] = mine
        if others is not None or before["count"]:
            o = others or {"count": 0, "mem_bytes": 0}
            extra["processes_of_others"] = {
                "count": o["count"] + int(before["count"]),
                "mem_bytes": o["mem_bytes"] + int(before["mem_bytes"]),
            }
        out.append(dataclasses.replace(d, extra=extra))
    return tuple(out)
