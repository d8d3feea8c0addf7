"""The probe engine's attaching and detaching: rows attached per process, switched off
and on, detached."""

from __future__ import annotations

import contextlib
import ctypes

from adaptyst_top.collectors.probes.bpf.libbpf import BpfObject
from adaptyst_top.collectors.probes.bpf.module_object import AFTER
from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.engine.scope import Scope
from adaptyst_top.collectors.probes.engine.state import EngineState
from adaptyst_top.collectors.probes.model import (
    Attachment,
    ProbeError,
    ProbeModule,
    Row,
    closes_interval,
    one_line,
)
from adaptyst_top.collectors.probes.spec import ProbeSpec
from adaptyst_top.snapshot import ProbeState
from adaptyst_top.system.targets import pid_alive


class Attacher:
    """Rows attached for every process of the scope, and detached; switched off and on
    by a gate in their module's map (at once), then detached off the caller's thread."""

    def __init__(self, state: EngineState, scope: Scope) -> None:
        self.state = state
        self.scope = scope

    def detach_pid(self, rows: list[Row], pid: int) -> None:
        """ROWS no longer for PID."""
        multi: dict[int, ProbeModule] = {}
        for row in rows:
            if row.module is None:
                continue
            if row.module.multi is not None:
                row.pids.discard(pid)
                multi[id(row.module)] = row.module
                continue
            with row.module.lock:
                if not row.module.closed and pid in row.pids:
                    for a in sorted(row.attachments, key=lambda a: closes_interval(row, a)):
                        self.detach_one(row.module.bpf, a, pid)
                row.pids.discard(pid)
        for module in multi.values():
            with module.lock, contextlib.suppress(OSError):
                if not module.closed:
                    self.relink(module, pid)

    def attach_row(self, row: Row) -> None:
        assert row.module is not None
        pids = self.scope.attach_pids()
        if not pids and self.scope.pid is not None:
            raise ProbeError(f"PID {self.scope.pid} exited during attach")
        try:
            for pid in pids:
                try:
                    self.attach_pid(row, pid)
                except Exception:
                    if pid in (self.scope.pid, -1) or pid_alive(pid):
                        raise
                    # a followed process that exited meanwhile: nothing to attach
        except Exception as exc:
            for pid in list(row.pids):
                self.detach_pid([row], pid)
            if self.scope.pid is not None and not pid_alive(self.scope.pid):
                raise ProbeError(f"PID {self.scope.pid} exited during attach") from None
            raise ProbeError(
                f"attaching {row.name} in {row.path} failed: {one_line(exc)}"
            ) from None
        row.state, row.linked = "attached", True

    def attach_multi(self, module: ProbeModule, spec: ProbeSpec) -> None:
        """Every row of a multi-link module for every process probed: one link per
        process and direction, whatever the number of functions."""
        pids = self.scope.attach_pids()
        if not pids and self.scope.pid is not None:
            raise ProbeError(f"PID {self.scope.pid} exited during attach")
        for pid in pids:
            try:
                self.attach_rows_pid(module.rows, pid)
            except Exception as exc:
                if pid in (self.scope.pid, -1) or pid_alive(pid):
                    if self.scope.pid is not None and not pid_alive(self.scope.pid):
                        raise ProbeError(f"PID {self.scope.pid} exited during attach") from None
                    raise ProbeError(f"attaching {spec.text} failed: {one_line(exc)}") from None
        for row in module.rows:
            if row.state != "error":
                row.state, row.linked = "attached", True

    def attach_rows_pid(self, rows: list[Row], pid: int) -> None:
        """ROWS for one more process: a multi-link module's in one relink."""
        modules: dict[int, ProbeModule] = {}
        for row in rows:
            assert row.module is not None
            if row.module.multi is None:
                self.attach_pid(row, pid)
            else:
                row.pids.add(pid)
                modules[id(row.module)] = row.module
        for module in modules.values():
            try:
                self.relink(module, pid)
            except Exception:
                for row in rows:
                    if row.module is module:
                        row.pids.discard(pid)
                raise

    def relink(self, module: ProbeModule, pid: int) -> None:
        """Make a multi-link module's links for PID cover its rows probed there; a row
        whose offset the kernel refused ends in error, gated, and the rest go on."""
        assert module.multi is not None
        wanted = {r.slot: r.offset for r in module.rows if pid in r.pids and r.offset is not None}
        after = {r.slot: r.after for r in module.rows if r.slot in wanted and r.after is not None}
        refused = module.multi.relink(pid, wanted, after)
        for slot in module.multi.after_refused:
            untimed(module.by_slot[slot])
        for slot, why in refused.items():
            row = module.by_slot[slot]
            self.set_gate(row, off=True)
            row.pids.clear()
            row.state, row.error, row.linked = "error", f"{row.name}: {why}", False

    def attach_pid(self, row: Row, pid: int) -> None:
        """Every attach point of ROW for one process (-1: every process), or none."""
        assert row.module is not None
        if row.module.multi is not None:
            self.attach_rows_pid([row], pid)
            if row.state == "error":
                raise ProbeError(row.error)
            return
        bpf = row.module.bpf
        done: list[Attachment] = []
        try:
            # What closes an interval first (a uretprobe, a pair's END), then what opens
            # it: in a process calling the function meanwhile, an entry seen before its
            # return was probed would leave a frame no return ever pops, and the
            # thread's stack, full of them, would measure nothing again.
            for a in sorted(row.attachments, key=lambda a: not closes_interval(row, a)):
                assert a.offset is not None  # the builder placed every one
                if a.fn_name == AFTER:
                    continue  # below: the row stands without it
                bpf.attach_uprobe(
                    a.fn_name,
                    a.path,
                    a.offset,
                    pid,
                    ret=a.ret,
                    cookie=a.cookie,
                    ref_ctr_offset=a.ref_ctr,
                )
                done.append(a)
        except Exception:
            for a in done:
                self.detach_one(bpf, a, pid)
            raise
        for a in [a for a in row.attachments if a.fn_name == AFTER and row.after is not None]:
            try:
                assert a.offset is not None
                bpf.attach_uprobe(a.fn_name, a.path, a.offset, pid, cookie=a.cookie)
            except OSError:  # refused there: the row stands, timed from its entry
                untimed(row)
        row.pids.add(pid)

    def detach_one(self, bpf: BpfObject, a: Attachment, pid: int) -> None:
        if a.offset is not None:
            bpf.detach_uprobe(a.path, a.offset, pid, ret=a.ret)

    def set_gate(self, row: Row, off: bool) -> None:
        assert row.module is not None
        gate = row.module.bpf["gate"]
        gate[ctypes.c_int(row.slot)] = ctypes.c_ubyte(1 if off else 0)

    def unlink(self, row: Row) -> None:
        """Detach for real (the kernel takes ~0.1 s per uprobe); runs off the caller's thread
        and without the engine lock, so that reads and toggles go on meanwhile."""
        with self.state.lock:
            if not row.linked or row.state == "attached" or row.module is None:
                return
            if row.module.closed:
                row.linked = False
                return
            row.unlinking = True
        with row.module.lock:
            if not row.module.closed and row.module.multi is not None:
                pids, row.pids = list(row.pids), set()
                for pid in pids:
                    with contextlib.suppress(OSError):
                        self.relink(row.module, pid)
            elif not row.module.closed:
                # Openers first, for the same reason: no entry without its return.
                for pid in list(row.pids):
                    for a in sorted(row.attachments, key=lambda a: closes_interval(row, a)):
                        self.detach_one(row.module.bpf, a, pid)
                row.pids.clear()
        with self.state.lock:
            row.linked = row.unlinking = False
            # Read again: another thread may have switched it on while the detach ran.
            now: ProbeState = row.state
            if now == "attached" and not row.module.closed:
                # Switched back on while the detach ran: attach again, then open the gate.
                try:
                    self.attach_row(row)
                    self.set_gate(row, off=False)
                except ProbeError as exc:
                    row.state, row.error = "error", str(exc)

    def switch_off(self, row: Row, state: ProbeState) -> None:
        if row.module is not None and not row.module.closed and row.state == "attached":
            self.set_gate(row, off=True)  # effective at once
            self.state.queue.put(lambda: self.unlink(row))
        row.state = state

    def set_enabled(self, row_id: int, enabled: bool) -> None:
        """Switch a known row on or off: a map write now, never a recompilation."""
        with self.state.lock:
            row = self.state.rows[row_id]
            if (
                self.state.closed
                or row.state in ("ended", "error")
                or row.module is None
                or row.module.closed
            ):
                raise ProbeError(f"{row.name}: cannot toggle a probe that is {row.state}")
            if enabled and row.state == "detached":
                if row.unlinking:
                    row.state = "attached"  # the running detach re-attaches when it ends
                    return
                if row.linked:
                    row.state = "attached"  # the queued detach will see this and stay away
                else:
                    self.attach_row(row)
                self.set_gate(row, off=False)
            elif not enabled and row.state == "attached":
                self.switch_off(row, "detached")


def untimed(row: Row) -> None:
    """ROW's second probe past its single-stepped entry was refused: its interval starts
    at the entry again, and so its class is the single-step's (its cost is what the row
    says is taken off). Its attachment stays listed: where it did attach, it is
    detached with the rest (and where it did not, detaching it is nothing)."""
    if row.after is not None:
        row.after = None
        row.cost_class = ov.SINGLESTEP
