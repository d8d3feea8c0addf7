"""The CPU time a probe session's processes used: the most of the CPU's energy its rows
may be charged. Nested probes in one session each count their calls' time (a function
and one it calls), so its rows' on-CPU time together can exceed what its processes ran;
split over the whole node's busy time, two such sessions could then claim more than
the CPU's energy between them. Capped by what their own processes ran, sessions of
different processes (users) never can."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def read_stat(pid: int, proc: Path) -> tuple[int, int, int] | None:
    """(uid, start, utime + stime in ns) of PID: every thread's, not reaped children's
    (those are counted where they are in scope); None once it is gone."""
    try:
        with open(proc / str(pid) / "stat") as f:
            uid = os.fstat(f.fileno()).st_uid
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    try:
        return uid, int(fields[19]), (int(fields[11]) + int(fields[12])) * TICK_NS
    except (IndexError, ValueError):
        return None


class ScopeCpu:
    """PIDS (a call giving the processes in scope now) or, for an agent's user's
    node-wide probes, every process of UID. delta_ns(): the CPU ns they used since
    the last call; a process first seen counts from then."""

    def __init__(
        self,
        pids: Callable[[], Iterable[int]] | None = None,
        uid: int | None = None,
        proc: Path = Path("/proc"),
    ) -> None:
        self.pids = pids
        self.uid = uid
        self.proc = proc
        self._seen: dict[tuple[int, int], int] = {}  # (pid, start) -> its CPU ns

    def holds(self, pid: int) -> bool:
        """Whether PID is one of the scope's processes now."""
        if self.pids is not None:
            return pid in set(self.pids())
        st = read_stat(pid, self.proc)
        return st is not None and (self.uid is None or st[0] == self.uid)

    def _candidates(self) -> Iterable[int]:
        if self.pids is not None:
            return self.pids()
        return (int(e.name) for e in os.scandir(self.proc) if e.name.isdigit())

    def delta_ns(self) -> int:
        seen: dict[tuple[int, int], int] = {}
        delta = 0
        for pid in self._candidates():
            st = read_stat(pid, self.proc)
            if st is None or (self.uid is not None and st[0] != self.uid):
                continue
            key = (pid, st[1])
            last = self._seen.get(key)
            if last is not None:
                delta += max(0, st[2] - last)
            seen[key] = st[2]
        self._seen = seen
        return delta
