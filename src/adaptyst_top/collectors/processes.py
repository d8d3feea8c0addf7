"""The process list a monitor opens on when it has no target: every process (root) or
the user's own, sorted by CPU as htop sorts them, CPU measured between two readings."""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

from adaptyst_top.snapshot.inert import inert

_ATTRS = ["pid", "ppid", "username", "name", "cmdline", "memory_info", "uids", "num_threads"]


@dataclass(frozen=True, slots=True)
class ProcessRow:
    pid: int
    user: str
    cpu: float  # % of one core since the previous reading (0 on the first)
    rss: int  # bytes
    threads: int
    name: str
    command: str  # the command line, or [name] where it has none


class ProcessTable:
    """Readings of the processes UID may see as its own (None: every process)."""

    def __init__(self, uid: int | None = None) -> None:
        self.uid = uid
        self._procs: dict[int, psutil.Process] = {}

    def rows(self) -> list[ProcessRow]:
        out = []
        seen: dict[int, psutil.Process] = {}
        me = os.getpid()
        for p in psutil.process_iter(_ATTRS):
            info = p.info
            if info["pid"] == me or info["ppid"] == 2 or info["pid"] == 2:
                continue  # ourselves, and the kernel's threads (no user stack to sample)
            uids = info.get("uids")
            if self.uid is not None and (uids is None or uids.real != self.uid):
                continue
            kept = self._procs.get(p.pid)
            proc = kept if kept is not None and _same(kept, p) else p
            seen[p.pid] = proc
            try:
                cpu = proc.cpu_percent(None)  # since this object's last call
            except psutil.Error:
                continue
            mem = info.get("memory_info")
            cmd = " ".join(info.get("cmdline") or []) or f"[{info.get('name') or '?'}]"
            # Another user's bytes: shown, never acted on (a newline would add a row).
            out.append(
                ProcessRow(
                    p.pid,
                    inert(str(info.get("username") or "?")),
                    cpu,
                    int(mem.rss) if mem is not None else 0,
                    int(info.get("num_threads") or 0),
                    inert(str(info.get("name") or "?")),
                    inert(cmd),
                )
            )
        self._procs = seen
        return sorted(out, key=lambda r: (-r.cpu, r.pid))


def _same(a: psutil.Process, b: psutil.Process) -> bool:
    """The same process, not another with its reused PID."""
    try:
        return bool(a.create_time() == b.create_time())
    except psutil.Error:
        return False
