"""The probe engine: eBPF uprobes and USDT probes with statistics kept in the kernel.

`add()` returns at once; resolving, planning, loading and attaching run on one
background thread (a precompiled object loads in 5-80 ms: docs/bpf.md). Each `add()`
loads one module whose programs serve all the attach points its spec matched. Toggling
a row detaches or re-attaches its already-loaded programs: nothing is loaded again.
`read()` walks the kernel maps once per interval; nothing streams per event.

The engine is composed of parts with one job each, on one state under one lock
(state): the processes in scope (scope), attaching (attach), the scope kept current
(watch) and the builder thread (build); here, what callers use. A spec's kind plans it
(../kinds), and planning (attach_plan), loading (../bpf: module_object, libbpf), kernel
reading (reading), the budget (../cost/budget), the rows' data (../model) and their
snapshot entries (output) live apart.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from adaptyst_top.collectors.probes.bpf.ebpf_env import (
    check_libbpf,
    check_privileges,
)
from adaptyst_top.collectors.probes.bpf.kernel_btf import BTFError
from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.cost.budget import BudgetWatch, budget_text, share_text
from adaptyst_top.collectors.probes.cost.oncpu import oncpu_offset
from adaptyst_top.collectors.probes.cost.table import CostTable
from adaptyst_top.collectors.probes.engine.attach import Attacher
from adaptyst_top.collectors.probes.engine.attach_account import AttachAccount
from adaptyst_top.collectors.probes.engine.build import Builder
from adaptyst_top.collectors.probes.engine.exited import retire_exited
from adaptyst_top.collectors.probes.engine.output import group_entry, row_entries
from adaptyst_top.collectors.probes.engine.reading import (
    bpf_run_ns,
    new_kernel_errors,
    read_module,
    reap_dead_threads,
    update_rates,
)
from adaptyst_top.collectors.probes.engine.scope import Scope
from adaptyst_top.collectors.probes.engine.state import (
    ATTACH_S_PER_POINT,
    DEFAULT_BUDGET,
    DEFAULT_MAX_ATTACH,
    ERRORS_EVERY,
    REAP_EVERY,
    EngineState,
)
from adaptyst_top.collectors.probes.engine.uprobe_multi import kernel_has_multi
from adaptyst_top.collectors.probes.engine.watch import ScopeWatch
from adaptyst_top.collectors.probes.kinds import parse_spec
from adaptyst_top.collectors.probes.model import ProbeError, ProbeGroup, ProbeModule, Row
from adaptyst_top.collectors.probes.safety import entry_safety
from adaptyst_top.collectors.probes.safety.confinement import Confinement
from adaptyst_top.collectors.probes.spec import ProbeSpec
from adaptyst_top.snapshot import ProbeEntry, ProbeRef, ProbeTarget
from adaptyst_top.system.pinned_files import PinnedFiles
from adaptyst_top.system.targets import TargetError, check_pid


class ProbeEngine:
    """Probes on a target's functions."""

    def __init__(
        self,
        pid: int | None = None,
        command_path: str | None = None,
        max_attach: int = DEFAULT_MAX_ATTACH,
        costs: CostTable | None = None,
        budget: float = DEFAULT_BUDGET,
        enforce_budget: bool = False,
        check_environment: bool = True,
        entry_policy: entry_safety.EntryPolicy | None = None,
        scope: Iterable[int] | None = None,
        follow: bool = False,
        admit: Callable[[int], str | None] | None = None,
        scope_name: str | None = None,
        multi_links: bool | None = None,
        account: AttachAccount | None = None,
        confine_uid: int | None = None,
        pinned: PinnedFiles | None = None,
        by_process: bool = False,
    ) -> None:
        """pid: the target process (its exit ends the probes); scope: other processes to
        probe from the start (a Slurm job's); follow: the processes these start join;
        admit: a process's refusal (None: may join), asked before one joins and when one
        execs; scope_name: what the scope is, for messages ("job 42"); multi_links:
        attach a spec's functions through multi-uprobe links (None: where the kernel
        has them), else one uprobe per function; account: the bound on attach
        points a user's engines share (the agent's, per user); confine_uid: hits
        count only in that user's processes while they are theirs (the agent's users);
        pinned: the files specs may name, opened when checked (the agent's users: a spec
        naming any other is refused); the engine closes them; by_process: each process's
        hits counted apart (a job's ranks), each row's entries then carrying them."""
        if check_environment:
            self.require_ebpf()
        if pid is not None:
            try:
                check_pid(pid)
            except TargetError as exc:
                raise ProbeError(str(exc)) from None
        if pinned is not None:
            pinned.handed_over = True
        try:
            confine = None if confine_uid is None else Confinement.of(confine_uid)
        except BTFError as exc:
            raise ProbeError(
                f"{exc}: without the kernel's BTF the agent cannot keep a user's probes "
                "out of the setuid programs their processes run"
            ) from None
        self.costs = costs or CostTable()
        self.budget = budget
        self.enforce_budget = enforce_budget
        self.state = EngineState(by_process)
        self.processes = Scope(self.state, pid, scope, admit, scope_name)
        self.attacher = Attacher(self.state, self.processes)
        self.watch = ScopeWatch(self.state, self.processes, self.attacher, command_path)
        self.bpf_stats = ov.BpfStats()
        self.bpf_stats_on = self.bpf_stats.available()
        self._last_read: float | None = None
        self._reads = 0
        self.overhead_share: float | None = None
        starts = self.processes.starts
        self.budget_watch = BudgetWatch(None if starts is None else lambda: list(starts), budget)
        self.builder = Builder(
            self.state,
            self.processes,
            self.attacher,
            command_path=command_path,
            max_attach=max_attach,
            entry_policy=entry_policy,
            multi_links=kernel_has_multi() if multi_links is None else multi_links,
            account=account,
            confine=confine,
            oncpu=oncpu_offset(),
            pinned=pinned,
            by_process=by_process,
        )
        if follow and starts is not None:
            # First on the compiler thread: followed before any probe attaches.
            self.state.queue.put(self.watch.start_following)
        # Joined once whole: another session of the user asks the account about every
        # engine of theirs at any time.
        self.account = account
        if account is not None:
            account.join(self)

    @staticmethod
    def require_ebpf() -> None:
        # One at a time: without privileges, the others need not (and may not) be asked.
        for ask in (check_privileges, check_libbpf):
            check = ask()
            if check.status in ("missing", "denied"):
                fix = f" (fix: {check.fix})" if check.fix else ""
                raise ProbeError(f"eBPF unavailable: {check.detail}{fix}")

    # What the parts hold, as callers read it.
    @property
    def pid(self) -> int | None:
        return self.processes.pid

    @property
    def scope(self) -> dict[int, int] | None:
        """Each process probed with its start; None: every process."""
        return self.processes.starts

    @property
    def joined(self) -> int:
        return self.processes.joined

    @property
    def groups(self) -> list[ProbeGroup]:
        return self.state.groups

    @property
    def rows(self) -> dict[int, Row]:
        return self.state.rows

    @property
    def modules(self) -> list[ProbeModule]:
        return self.state.modules

    @property
    def warnings(self) -> list[str]:
        return self.state.warnings

    @property
    def closed(self) -> bool:
        return self.state.closed

    @property
    def target_ended(self) -> bool:
        return self.state.target_ended

    @property
    def max_attach(self) -> int:
        return self.builder.max_attach

    @property
    def confine(self) -> Confinement | None:
        return self.builder.confine

    @property
    def oncpu(self) -> int | None:
        return self.builder.oncpu

    def points_held(self) -> int:
        return self.state.points_held()

    def groups_held(self) -> tuple[int, int]:
        return self.state.groups_held()

    def target(self) -> ProbeTarget:
        return self.processes.target()

    def scope_pids(self) -> list[int]:
        return self.processes.pids()

    def scope_pids_within(self, wait_s: float) -> list[int] | None:
        return self.processes.pids_within(wait_s)

    def follow(self, pid: int) -> bool:
        return self.watch.follow(pid)

    def unfollow(self, pid: int, why: str | None = None) -> None:
        self.watch.unfollow(pid, why)

    def set_enabled(self, row_id: int, enabled: bool) -> None:
        self.attacher.set_enabled(row_id, enabled)

    def add(self, spec: str | ProbeSpec) -> ProbeGroup:
        """Queue a spec; returns at once. Raises ProbeSpecError for a malformed spec."""
        parsed = spec if isinstance(spec, ProbeSpec) else parse_spec(spec)
        group = self.state.new_group(parsed)
        self.state.queue.put(group)
        return group

    def wait(self, timeout: float | None = None) -> bool:
        """Until every queued spec is attached or failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for g in list(self.groups):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not g.done.wait(left):
                return False
        return True

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Until the background work queued so far (builds, detaches) is done."""
        done = threading.Event()
        self.state.queue.put(done.set)
        return done.wait(timeout)

    def read(self) -> None:
        """Refresh every row's cumulative statistics from the kernel maps."""
        now = time.monotonic()
        dt = None if self._last_read is None else now - self._last_read
        self._last_read = now
        self.bpf_stats.tick()
        with self.state.lock:
            if not self.state.target_ended and (why := self.watch.check()):
                self._end_target(why)
            self._reads += 1
            for module in list(self.modules):
                if module.closed:
                    continue
                if self._reads % REAP_EVERY == 0:
                    retire_exited(module)  # before the read: what they counted stays in
                read_module(module)
                if self._reads % ERRORS_EVERY == 1:
                    self.warnings.extend(new_kernel_errors(module))
                if self._reads % REAP_EVERY == 0:
                    reap_dead_threads(module)
            refresh_bpf = self.bpf_stats.window_closed()
            for row in self.rows.values():
                update_rates(row, dt)
                if refresh_bpf:
                    self.bpf_run_ns(row, fresh=True)
            self._update_overhead(dt)

    def bpf_run_ns(self, row: Row, fresh: bool = False) -> float | None:
        """Mean kernel run time of this row's programs per hit (kernel.bpf_stats).

        Read from fdinfo only when fresh (read() asks just after each sampling window,
        when the figure can have changed); otherwise the last figure."""
        if fresh and self.bpf_stats_on:
            # A program's run time changes only when it runs: a row with no hit since
            # the last read keeps its figure, None for one never hit (one fdinfo read
            # per program saved: most rows of a wide glob are never hit).
            hits = sum(s[0] for s in row.stats.values())
            if hits != row.bpf_ns_hits:
                row.bpf_ns = bpf_run_ns(row) or row.bpf_ns
                row.bpf_ns_hits = hits
        return row.bpf_ns

    def _end_target(self, why: str) -> None:
        self.state.target_ended = True
        self.watch.close()
        for module in self.modules:
            read_module(module)  # the final statistics stay in the rows
        for row in self.rows.values():
            self.bpf_run_ns(row, fresh=True)
        for row in self.rows.values():
            if row.state in ("attached", "detached"):
                row.state = "ended"
        for module in self.modules:
            module.close()
        self.warnings.append(f"{why}; final statistics kept")

    def _update_overhead(self, dt: float | None) -> None:
        over = self.budget_watch.update(list(self.rows.values()), self.costs, dt)
        self.overhead_share = over.share
        if over.costliest is None or over.share is None:  # a costliest only when over
            return
        worst = self.rows[over.costliest]
        msg = (
            f"probe overhead {share_text(over.share)} of the target's CPU time exceeds "
            f"the budget of {budget_text(self.budget)}; costliest: {worst.name}"
        )
        if self.enforce_budget and worst.state == "attached":
            self.attacher.switch_off(worst, "detached")
            msg += " (disabled)"
        self.warnings.append(msg)

    def _row_entries(self, row: Row, with_hist: bool = True) -> list[ProbeEntry]:
        cost = self.costs.get(row.cost_class)
        bpf_ns = self.bpf_run_ns(row)
        # Same figures, no hit in this interval or the last (so every rate reads 0 both
        # times): the entries handed out last time, as they were.
        sig: tuple[object, ...] = (row.stats_version, row.interval_hits or None, row.state)
        sig += (row.error, bpf_ns, cost.per_hit_ns, cost.in_interval_ns, cost.source, with_hist)
        if row.entries is not None and row.entries[0] == sig and not row.interval_hits:
            return row.entries[1]
        count_cost = None if row.count_class is None else self.costs.get(row.count_class)
        entries = row_entries(row, cost, bpf_ns, with_hist, count_cost)
        row.entries = (sig, entries)
        return entries

    def snapshot_rows(self, with_hist: bool = True) -> list[ProbeEntry]:
        """Every group's entries, in the order the specs were added."""
        out: list[ProbeEntry] = []
        with self.state.lock:
            for group in self.groups:
                if group.state == "error" or not group.rows:
                    out.append(group_entry(group))
                    continue
                for row in group.rows:
                    out.extend(self._row_entries(row, with_hist))
        return out

    def toggle(self, ref: ProbeRef) -> bool:
        """Switch a snapshot entry's row on or off; whether it is now on."""
        row = self.rows.get(ref.row) if ref.row is not None else None
        if row is None:
            raise ProbeError("this probe has no attach point to switch")
        enabled = row.state != "attached"
        self.set_enabled(row.id, enabled)
        return enabled

    def remove(self, ref: ProbeRef) -> str:
        """Remove the spec a snapshot entry came from (all its rows); its text."""
        with self.state.lock:
            group = next((g for g in self.groups if g.id == ref.group), None)
        if group is None:
            raise ProbeError("this probe was already removed")
        self.remove_group(group)
        return group.spec_text

    def remove_group(self, group: ProbeGroup) -> None:
        with self.state.lock:
            for row in group.rows:
                self.attacher.switch_off(row, "detached")
                self.rows.pop(row.id, None)
            modules = {id(r.module): r.module for r in group.rows if r.module}
            for m in modules.values():
                if m is not None and all(r.id not in self.rows for r in m.rows):
                    m.close()
                    self.modules.remove(m)
            if group in self.groups:
                self.groups.remove(group)

    def close(self) -> None:
        if self.state.closed:
            return
        self.state.closed = True
        self.state.queue.put(None)
        # An attach under way stops at its next attach point and closes what it made;
        # a compile (a second or two) runs to its end first. Waiting here means no
        # module is made after this, and none is cleaned up by bcc at interpreter exit.
        self.builder.join()
        with self.state.lock:
            self.watch.close()
            for module in self.modules:
                module.close()
            for row in self.rows.values():
                if row.state == "attached":
                    row.state = "detached"
        self.processes.held.release_all()
        self.bpf_stats.restore()

    def __enter__(self) -> ProbeEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "ATTACH_S_PER_POINT",
    "DEFAULT_BUDGET",
    "DEFAULT_MAX_ATTACH",
    "ProbeEngine",
    "ProbeError",
    "ProbeGroup",
    "Row",
]
