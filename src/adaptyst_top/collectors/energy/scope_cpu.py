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

from adaptyst_top.system.targets import TICK_NS as TICK_NS
from adaptyst_top.system.targets import process_stat


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
        st = process_stat(pid, self.proc)
        return st is not None and (self.uid is None or st.uid == self.uid)

    def _candidates(self) -> Iterable[int]:
        if self.pids is not None:
            return self.pids()
        return (int(e.name) for e in os.scandir(self.proc) if e.name.isdigit())

    def delta_ns(self) -> int:
        seen: dict[tuple[int, int], int] = {}
        delta = 0
        for pid in self._candidates():
            st = process_stat(pid, self.proc)
            if st is None or (self.uid is not None and st.uid != self.uid):
                continue
            key = (pid, st.start)
            last = self._seen.get(key)
            if last is not None:
                delta += max(0, st.cpu_ns - last)
            seen[key] = st.cpu_ns
        self._seen = seen
        return delta
