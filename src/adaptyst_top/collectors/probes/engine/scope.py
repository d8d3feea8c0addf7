"""The probe engine's scope: the processes its probes attach to (one, a job's, the
children they start; None: every process), each held with its start so that a PID
reused by another process is never probed."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from adaptyst_top.collectors.probes.engine.state import EngineState
from adaptyst_top.snapshot import ProbeTarget
from adaptyst_top.system.held_processes import HeldProcesses
from adaptyst_top.system.targets import pid_alive, process_start


class Scope:
    """PID: the target (its exit ends the probes); OTHERS: processes probed from the
    start (a Slurm job's); ADMIT: a process's refusal (None: it may join), asked before
    one joins and when one execs; NAME: what the scope is, for messages ("job 42")."""

    def __init__(
        self,
        state: EngineState,
        pid: int | None,
        others: Iterable[int] | None,
        admit: Callable[[int], str | None] | None,
        name: str | None,
    ) -> None:
        self.state = state
        self.pid = pid
        self.admit = admit
        self.held = HeldProcesses()  # each process of the scope, as it was checked
        # pid -> its start; None: every process (root's node-wide probes).
        self.starts: dict[int, int] | None = None
        if pid is not None or others is not None:
            self.starts = {}
            for p in ([pid] if pid is not None else []) + list(others or ()):
                if (start := process_start(p)) is not None and self.held.hold(p, start):
                    self.starts[p] = start
        self.name = name or (f"PID {pid}" if pid is not None else "the target")
        self.joined = 0  # processes that joined after the start

    def attach_pids(self) -> list[int]:
        """The processes to attach for, alive and still the ones that joined; [-1] (every
        process) for node-wide probes."""
        if self.starts is None:
            return [-1]
        return [p for p, start in self.starts.items() if process_start(p) == start]

    def reference_pid(self) -> int | None:
        """The process whose view resolves names (library short names, USDT): the target,
        or another live process of the scope once it is gone."""
        if self.pid is not None and pid_alive(self.pid):
            return self.pid
        return next(iter(self.attach_pids()), None) if self.starts else None

    def target(self) -> ProbeTarget:
        """What the probes attach to now, for the snapshot."""
        if self.starts is None:
            return ProbeTarget("every process")
        return ProbeTarget(self.name, tuple(sorted(self.pids())))

    def pids(self) -> list[int]:
        """The processes probed now (empty for node-wide probes)."""
        with self.state.lock:
            return list(self.starts or ())

    def pids_within(self, wait_s: float) -> list[int] | None:
        """pids(), or None when the engine stayed busy past WAIT_S (a read stuck in its
        user's memory: a stopped FUSE daemon behind a string key), so that the agent's
        guard goes on to the other users instead of waiting with it."""
        if not self.state.lock.acquire(timeout=wait_s):
            return None
        try:
            return list(self.starts or ())
        finally:
            self.state.lock.release()

    def may_join(self, pid: int) -> bool:
        """Whether PID could join now (the caller holds the lock)."""
        st = self.state
        return not (self.starts is None or st.closed or st.target_ended or pid in self.starts)

    def take(self, pid: int, start: int | None) -> bool:
        """PID, started at START, joins (the caller holds the lock); False if it may not."""
        if start is None or not self.may_join(pid) or not self.held.hold(pid, start):
            return False
        assert self.starts is not None
        self.starts[pid] = start
        self.joined += 1
        return True

    def drop(self, pid: int) -> bool:
        """PID leaves (the caller holds the lock); False if it was not in scope."""
        if self.starts is None or self.starts.pop(pid, None) is None:
            return False
        self.held.release(pid)
        return True

    def exited(self) -> list[int]:
        """The processes other than the target that exited (their PIDs may come back as
        someone else's)."""
        return [
            pid
            for pid, start in list((self.starts or {}).items())
            if pid != self.pid and process_start(pid) != start
        ]

    def others(self) -> list[int]:
        return [p for p in self.starts or () if p != self.pid]
