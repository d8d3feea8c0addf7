"""The probe engine's state: what its parts read and change under its one lock.

The engine (probe_engine.py) is composed of parts, each with one job, all on this one
state: the processes in scope (scope.Scope), attaching and detaching rows
(attach.Attacher) and the compiler thread that builds a spec (build.Builder). The engine itself reads, checks the target and answers callers."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.model import ProbeGroup, ProbeModule, Row
from adaptyst_top.collectors.probes.spec import ProbeSpec
from adaptyst_top.snapshot.inert import inert

DEFAULT_MAX_ATTACH = ov.DEFAULT_MAX_ATTACH
DEFAULT_BUDGET = ov.DEFAULT_BUDGET


WORKER_JOIN_S = 60.0  # close() waits this long at most for an attach under way
# Attaching takes ~30 ms per uprobe here (two per function): the time allowed for a
# spec grows with what it matched, on top of a fixed allowance for compiling.
ATTACH_S_PER_POINT = 0.25
REAP_EVERY = 10  # reads between sweeps of the stacks of exited threads
# Reads between looks at the programs' error counts (a full map, a stack too deep): a
# warning within seconds is soon enough, and each look was 50 us a module every tick.
ERRORS_EVERY = 5

# Work for the compiler thread: a spec to build, a detach to finish, None to stop.
Work = ProbeGroup | Callable[[], None] | None


class EngineState:
    """The specs (groups), their rows and modules, the warnings, the compiler thread's
    queue, and whether the engine or its target ended: one state machine (pending,
    attached, detached, ended, error) shared by the caller's, the compiler's and the
    reader's threads under `lock`."""

    def __init__(self, by_process: bool = False) -> None:
        self.lock = threading.RLock()
        # Each process's hits apart: every module's maps are as large as a keyed one's.
        self.by_process = by_process
        self.groups: list[ProbeGroup] = []
        self.rows: dict[int, Row] = {}
        self.modules: list[ProbeModule] = []
        self.warnings: list[str] = []
        self.queue: queue.Queue[Work] = queue.Queue()
        self.closed = False
        self.target_ended = False
        self._next_row = 0
        self._next_group = 0

    def new_group(self, spec: ProbeSpec) -> ProbeGroup:
        with self.lock:
            group = ProbeGroup(self._next_group, spec.text, spec)
            self._next_group += 1
            self.groups.append(group)
        return group

    def new_row(self, spec: ProbeSpec, name: str, path: str, cls: str, slot: int) -> Row:
        with self.lock:
            row = Row(self._next_row, spec, inert(name), path, cls, slot)  # a symbol: any bytes
            self._next_row += 1
        return row

    def live_rows(self) -> list[Row]:
        """Rows attached now whose programs are loaded (a process joining takes these)."""
        return [
            row
            for row in self.rows.values()
            if row.state == "attached"
            and row.linked
            and not row.unlinking
            and row.module is not None
            and not row.module.closed
        ]

    def points_held(self) -> int:
        """Attach points held: rows, and rows planned for a spec still being built."""
        with self.lock:
            building = sum(g.planned for g in self.groups if g.state == "compiling")
            return len(self.rows) + building

    def groups_held(self) -> tuple[int, int]:
        """(modules, keyed modules) held or being built."""
        with self.lock:
            live = [g for g in self.groups if g.state != "error"]
            keyed = [g for g in live if self.by_process or (g.spec is not None and g.spec.keyed)]
            return len(live), len(keyed)
