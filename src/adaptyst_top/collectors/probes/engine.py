"""The probe engine: eBPF uprobes and USDT probes with statistics kept in the kernel.

`add()` returns at once; resolving, compiling and attaching run on one background
thread (bcc's clang takes about a second per module). Each `add()` builds one
module whose programs serve all the attach points its spec matched. Toggling a row
detaches or re-attaches its already-loaded programs: no recompilation, a few ms.
`read()` walks the kernel maps once per interval; nothing streams per event.

One state machine (pending, attached, detached, ended, error) shared by three threads
(the caller's, the background worker's, the reader's) under one lock, built in layers:
the state (engine_state), attaching (engine_attach), the processes in scope
(engine_scope), the background work (engine_build) and, here, what callers use.
Planning (attach_plan), kernel reading (reading), the budget (budget), the rows' data
(model), their snapshot entries (output) and bcc's workarounds (bcc_extras) live apart.
"""

from __future__ import annotations

import threading
import time

from adaptyst_top.collectors.probes.budget import budget_text, share_text
from adaptyst_top.collectors.probes.engine_build import EngineBuild
from adaptyst_top.collectors.probes.engine_state import (
    ATTACH_S_PER_POINT,
    DEFAULT_BUDGET,
    DEFAULT_MAX_ATTACH,
    ERRORS_EVERY,
    REAP_EVERY,
    WORKER_JOIN_S,
)
from adaptyst_top.collectors.probes.kinds import parse_spec
from adaptyst_top.collectors.probes.model import (
    ProbeError,
    ProbeGroup,
    Row,
)
from adaptyst_top.collectors.probes.output import group_entry, row_entries
from adaptyst_top.collectors.probes.reading import (
    new_kernel_errors,
    read_module,
    reap_dead_threads,
    update_rates,
)
from adaptyst_top.collectors.probes.spec import ProbeSpec
from adaptyst_top.snapshot import ProbeEntry


class ProbeEngine(EngineBuild):
    """Probes on a target's functions (EngineState.__init__ says what each argument means)."""

    def add(self, spec: str | ProbeSpec) -> ProbeGroup:
        """Queue a spec; returns at once. Raises ProbeSpecError for a malformed spec."""
        parsed = spec if isinstance(spec, ProbeSpec) else parse_spec(spec)
        with self._lock:
            group = ProbeGroup(self._next_group, parsed.text, parsed)
            self._next_group += 1
            self.groups.append(group)
        self._queue.put(group)
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
        self._queue.put(done.set)
        return done.wait(timeout)

    def read(self) -> None:
        """Refresh every row's cumulative statistics from the kernel maps."""
        now = time.monotonic()
        dt = None if self._last_read is None else now - self._last_read
        self._last_read = now
        self.bpf_stats.tick()
        with self._lock:
            if not self.target_ended:
                self._check_target()
            self._reads += 1
            for module in list(self.modules):
                if module.closed:
                    continue
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
            self._switch_off(worst, "detached")
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
        entries = row_entries(row, cost, bpf_ns, with_hist)
        row.entries = (sig, entries)
        return entries

    def snapshot_rows(self, with_hist: bool = True) -> list[ProbeEntry]:
        """Every group's entries, in the order the specs were added."""
        out: list[ProbeEntry] = []
        with self._lock:
            for group in self.groups:
                if group.state == "error" or not group.rows:
                    out.append(group_entry(group))
                    continue
                for row in group.rows:
                    out.extend(self._row_entries(row, with_hist))
        return out

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        # An attach under way stops at its next attach point and closes what it made;
        # a compile (a second or two) runs to its end first. Waiting here means no
        # module is made after this, and none is cleaned up by bcc at interpreter exit.
        if threading.current_thread() is not self._worker:
            self._worker.join(WORKER_JOIN_S)
        with self._lock:
            if self._follower is not None:
                self._follower.close()
            for module in self.modules:
                module.close()
            for row in self.rows.values():
                if row.state == "attached":
                    row.state = "detached"
        self.held.release_all()
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
