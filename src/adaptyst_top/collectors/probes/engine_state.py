"""The probe engine's state: what every part of it reads and changes under its one lock.

The engine is built in layers, each a class on the one below: this state, attaching
and detaching (engine_attach), the processes in scope (engine_scope), the background
work that builds a spec (engine_build), and the engine's public face (engine)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Hashable, Iterable

from adaptyst_top.collectors.probes import entry_safety
from adaptyst_top.collectors.probes import overhead as ov
from adaptyst_top.collectors.probes.attach_account import AttachAccount
from adaptyst_top.collectors.probes.budget import BudgetWatch
from adaptyst_top.collectors.probes.confinement import Confinement
from adaptyst_top.collectors.probes.ebpf_env import (
    check_bcc,
    check_kernel_headers,
    check_privileges,
)
from adaptyst_top.collectors.probes.kernel_btf import BTFError
from adaptyst_top.collectors.probes.model import (
    ProbeError,
    ProbeGroup,
    ProbeModule,
    Row,
)
from adaptyst_top.collectors.probes.oncpu import oncpu_source
from adaptyst_top.collectors.probes.process_follow import (
    ProcessFollower,
)
from adaptyst_top.collectors.probes.reading import (
    bpf_run_ns,
)
from adaptyst_top.collectors.probes.uprobe_multi import kernel_has_multi
from adaptyst_top.system.held_processes import HeldProcesses
from adaptyst_top.system.pinned_files import PinnedFiles
from adaptyst_top.system.targets import (
    TargetError,
    check_pid,
    process_start,
)

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


class EngineState:
    # The layers above define these; the worker thread and following start here.
    def _work(self) -> None:
        raise NotImplementedError

    def _start_following(self) -> None:
        raise NotImplementedError

    def __init__(
        self,
        pid: int | None = None,
        command_path: str | None = None,
        max_attach: int = DEFAULT_MAX_ATTACH,
        costs: ov.CostTable | None = None,
        budget: float = DEFAULT_BUDGET,
        enforce_budget: bool = False,
        check_environment: bool = True,
        entry_policy: entry_safety.EntryPolicy | None = None,
        scope: Iterable[int] | None = None,
        follow: bool = False,
        admit: Callable[[int], str | None] | None = None,
        scope_name: str | None = None,
        multi_links: bool | None = None,
        owner: Hashable = None,
        account: AttachAccount | None = None,
        confine_uid: int | None = None,
        pinned: PinnedFiles | None = None,
    ) -> None:
        """pid: the target process (its exit ends the probes); scope: other processes to
        probe from the start (a Slurm job's); follow: the processes these start join;
        admit: a process's refusal (None: may join), asked before one joins and when one
        execs; scope_name: what the scope is, for messages ("job 42"); multi_links:
        attach a spec's functions through multi-uprobe links (None: where the kernel
        has them), else one uprobe per function; owner: whose turn at the compiler this
        engine takes (the agent's users take turns); account: the bound on attach
        points its owner's engines share (the agent's, per user); confine_uid: hits
        count only in that user's processes while they are theirs (the agent's users);
        pinned: the files specs may name, opened when checked (the agent's users: a spec
        naming any other is refused); the engine closes them."""
        if check_environment:
            self.require_ebpf()
        if pid is not None:
            try:
                check_pid(pid)
            except TargetError as exc:
                raise ProbeError(str(exc)) from None
        self.pid = pid
        # The processes the probes attach to, each with its start (a PID reused by another
        # process is never attached); None: every process (root's node-wide probes).
        self.scope: dict[int, int] | None = None
        self.held = HeldProcesses()  # each process of the scope, as it was checked
        if pid is not None or scope is not None:
            self.scope = {}
            for p in ([pid] if pid is not None else []) + list(scope or ()):
                if (start := process_start(p)) is not None and self.held.hold(p, start):
                    self.scope[p] = start
        self.scope_name = scope_name or (f"PID {pid}" if pid is not None else "the target")
        self.admit = admit
        self.joined = 0  # processes that joined the scope after the start
        self._follower: ProcessFollower | None = None
        self._main_gone_told = False
        self.command_path = command_path
        self.max_attach = max_attach
        self.owner = owner
        self.account = account
        self.pinned = pinned
        if pinned is not None:
            pinned.handed_over = True
        try:
            self.confine = None if confine_uid is None else Confinement.of(confine_uid)
        except BTFError as exc:
            raise ProbeError(
                f"{exc}: without the kernel's BTF the agent cannot keep a user's probes "
                "out of the setuid programs their processes run"
            ) from None
        self.oncpu = oncpu_source()  # None: calls get no on-CPU time (no BTF)
        self.multi_links = kernel_has_multi() if multi_links is None else multi_links
        self.costs = costs or ov.CostTable()
        self.budget = budget
        self.enforce_budget = enforce_budget
        # Which first instructions may carry a probe; the boot's verdicts by default,
        # looked up (or checked) when the first single-stepped attach point comes.
        self._entry_policy = entry_policy
        self.groups: list[ProbeGroup] = []
        self.rows: dict[int, Row] = {}
        self.modules: list[ProbeModule] = []
        self.warnings: list[str] = []
        self.target_ended = False
        self.overhead_share: float | None = None
        self._lock = threading.RLock()
        self._next_row = 0
        self._next_group = 0
        # Work for the background thread: specs to build, detaches to finish, None to stop.
        self._queue: queue.Queue[ProbeGroup | Callable[[], None] | None] = queue.Queue()
        self.bpf_stats = ov.BpfStats()
        self.bpf_stats_on = self.bpf_stats.available()
        self._last_read: float | None = None
        self._reads = 0
        self.budget_watch = BudgetWatch(
            None if self.scope is None else lambda: list(self.scope or ()), budget
        )
        self._closed = False
        self._exe: str | None = None  # the target's program, to notice an exec
        self._exe_link: str | None = None  # its /proc link as last read (realpath on change)
        # Joined once whole: another session of the user asks the account about every
        # engine of theirs at any time (an engine half made had no _closed yet).
        if account is not None:
            account.join(self)
        self._worker = threading.Thread(target=self._work, name="probe-compiler", daemon=True)
        self._worker.start()
        if follow and self.scope is not None:
            # First on the worker: followed before any probe attaches.
            self._queue.put(self._start_following)

    @staticmethod
    def require_ebpf() -> None:
        # One at a time: without privileges, the others need not (and may not) be asked.
        for ask in (check_privileges, check_bcc, check_kernel_headers):
            check = ask()
            if check.status in ("missing", "denied"):
                fix = f" (fix: {check.fix})" if check.fix else ""
                raise ProbeError(f"eBPF unavailable: {check.detail}{fix}")

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

    @property
    def closed(self) -> bool:
        return self._closed

    def points_held(self) -> int:
        """Attach points held: rows, and rows planned for a spec still being built."""
        with self._lock:
            building = sum(g.planned for g in self.groups if g.state == "compiling")
            return len(self.rows) + building

    def groups_held(self) -> tuple[int, int]:
        """(modules, keyed modules) held or being built."""
        with self._lock:
            live = [g for g in self.groups if g.state != "error"]
            return len(live), sum(1 for g in live if g.spec is not None and g.spec.keyed)
