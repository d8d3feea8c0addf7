"""The probe engine: eBPF uprobes and USDT probes with statistics kept in the kernel.

`add()` returns at once; resolving, compiling and attaching run on one background
thread (bcc's clang takes about a second per module). Each `add()` builds one
module whose programs serve all the attach points its spec matched. Toggling a row
detaches or re-attaches its already-loaded programs: no recompilation, a few ms.
`read()` walks the kernel maps once per interval; nothing streams per event.

Long on purpose: what is left here is one state machine (pending, attached, detached,
ended, error) shared by three threads (the caller's, the background worker's, the
reader's) under one lock; split, its transitions would be read in several files.
Which processes the probes attach to (one, a job's, the children they start, or every
one) is part of that machine: a process joins or leaves while rows switch.
Planning (attach_plan), kernel reading (probe_reading), the budget (probe_budget), the
rows' data (probe_model), their snapshot entries (probe_output) and bcc's workarounds
(bcc_extras) live apart.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from functools import partial
from typing import Any

from adaptyst_top.collectors.probes import entry_safety
from adaptyst_top.collectors.probes import overhead as ov
from adaptyst_top.collectors.probes.attach_account import AttachAccount
from adaptyst_top.collectors.probes.attach_plan import PlanError, plan_uprobes, plan_usdt
from adaptyst_top.collectors.probes.bcc_extras import (
    attach_with_semaphore,
    bcc_stderr_captured,
    usdt_context,
    usdt_readers,
)
from adaptyst_top.collectors.probes.bpf_program import (
    MULTI_ENTRY,
    MULTI_RETURN,
    Slot,
    module_source,
)
from adaptyst_top.collectors.probes.budget import BudgetWatch, share_text
from adaptyst_top.collectors.probes.compile_turns import COMPILE_TURNS
from adaptyst_top.collectors.probes.confinement import Confinement
from adaptyst_top.collectors.probes.ebpf_env import (
    check_bcc,
    check_kernel_headers,
    check_privileges,
)
from adaptyst_top.collectors.probes.elf_info import (
    ElfInfo,
    NotELFError,
    read_elf,
)
from adaptyst_top.collectors.probes.kernel_btf import BTFError
from adaptyst_top.collectors.probes.model import (
    Attachment,
    ProbeError,
    ProbeGroup,
    ProbeModule,
    Row,
)
from adaptyst_top.collectors.probes.output import group_entry, row_entries
from adaptyst_top.collectors.probes.process_follow import (
    ProcessEvent,
    ProcessFollower,
    descendants,
    is_thread,
)
from adaptyst_top.collectors.probes.reading import (
    bpf_run_ns,
    new_kernel_errors,
    read_module,
    reap_dead_threads,
    update_rates,
)
from adaptyst_top.collectors.probes.spec import ProbeSpec, ProbeSpecError, parse_spec
from adaptyst_top.collectors.probes.uprobe_multi import MultiLinks, kernel_has_multi
from adaptyst_top.snapshot import ProbeEntry, ProbeRef, ProbeTarget
from adaptyst_top.snapshot.inert import inert
from adaptyst_top.system.held_processes import HeldProcesses
from adaptyst_top.system.pinned_files import PinnedFiles
from adaptyst_top.system.targets import (
    TargetError,
    check_pid,
    mapped_files,
    mount_root,
    pid_alive,
    process_start,
    resolve_target,
)

DEFAULT_MAX_ATTACH = ov.DEFAULT_MAX_ATTACH
DEFAULT_BUDGET = ov.DEFAULT_BUDGET


WORKER_JOIN_S = 60.0  # close() waits this long at most for an attach under way
# Attaching takes ~30 ms per uprobe here (two per function): the time allowed for a
# spec grows with what it matched, on top of a fixed allowance for compiling.
ATTACH_S_PER_POINT = 0.25
REAP_EVERY = 10  # reads between sweeps of the stacks of exited threads


class ProbeEngine:
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
        if account is not None:
            account.join(self)
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
        self._worker = threading.Thread(target=self._work, name="probe-compiler", daemon=True)
        self._worker.start()
        if follow and self.scope is not None:
            # First on the worker: followed before any probe attaches.
            self._queue.put(self._start_following)

    # ----- environment ---------------------------------------------------------

    @staticmethod
    def require_ebpf() -> None:
        # One at a time: without privileges, the others need not (and may not) be asked.
        for ask in (check_privileges, check_bcc, check_kernel_headers):
            check = ask()
            if check.status in ("missing", "denied"):
                fix = f" (fix: {check.fix})" if check.fix else ""
                raise ProbeError(f"eBPF unavailable: {check.detail}{fix}")

    # ----- adding probes ---------------------------------------------------------

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

    def _work(self) -> None:
        while True:
            group = self._queue.get()
            if group is None:
                # Closed: no build reads the files after this, and module.close() detaches
                # without naming them (a toggle would: it is queued here, never after).
                if self.pinned is not None:
                    with self._lock:  # a toggle attaching now (by the file) ends first
                        self.pinned.close()
                return
            if not isinstance(group, ProbeGroup):
                with contextlib.suppress(Exception):
                    group()
                continue
            group.state = "compiling"
            try:
                self._build(group)
                group.state = "attached"
            except (ProbeError, TargetError, ProbeSpecError, NotELFError, FileNotFoundError) as exc:
                group.state, group.error = "error", str(exc).splitlines()[0]
            except Exception as exc:  # bcc raises plain Exception; keep the engine alive
                group.state, group.error = "error", _one_line(exc)
            finally:
                if group.state == "error":
                    self.warnings.append(group.error)  # the status line's latest word
                group.done.set()

    def _resolve(self, spec: ProbeSpec) -> tuple[str, str, ElfInfo]:
        """(the file's path, the path its bytes are read from, its ELF)."""
        target = spec.target
        if self.command_path and target in (
            self.command_path,
            self.command_path.rsplit("/", 1)[-1],
        ):
            target = self.command_path
        if self.pinned is not None:
            path, source = self.pinned.source(target)
        else:
            path = source = resolve_target(target, self._reference_pid())
        return path, source, read_elf(source)

    def _build(self, group: ProbeGroup) -> None:
        spec = group.spec
        assert spec is not None
        started = time.monotonic()
        path, source, elf = self._resolve(spec)
        multi = False
        with self.account.planning if self.account else contextlib.nullcontext():
            if spec.kind == "uprobe":
                rows, slots, refused = self._plan_uprobes(spec, path, source, elf)
                multi = self.multi_links and all(r.offset is not None for r in rows)
                usdt_contexts: list[Any] = []
            else:
                rows, slots, usdt_contexts = self._plan_usdt(spec, path, source, elf)
                refused = []
            group.planned = len(rows)
        group.timings["plan_s"] = (planned_at := time.monotonic()) - started
        from bcc import BPF  # type: ignore[import-not-found]

        try:
            # The USDT argument readers are generated here rather than by passing
            # usdt_contexts to BPF(), which would also attach every location itself,
            # with its own idea of the PID; we attach them with ours, so they can be toggled.
            with COMPILE_TURNS.turn(self.owner):
                text = usdt_readers(usdt_contexts) + module_source(slots, multi, self.confine)
                bpf = BPF(text=text)
            links = MultiLinks(bpf, source, MULTI_ENTRY, MULTI_RETURN) if multi else None
        except ProbeError:
            raise
        except Exception as exc:
            raise ProbeError(f"compiling probes for {spec.text} failed: {_one_line(exc)}") from None
        group.timings["compile_s"] = (compiled_at := time.monotonic()) - planned_at
        module = ProbeModule(bpf, rows, links)
        if self.scope is not None:  # a key's string is read from the process checked
            module.keys.open_mem = partial(self.held.opened, name="mem")
        for row in rows:
            row.module = module
            if multi:
                row.fns = [MULTI_ENTRY, MULTI_RETURN]
        try:
            with bcc_stderr_captured():
                if multi:
                    self._attach_multi(module, spec)
                for row in rows if not multi else ():
                    if self._closed:
                        raise ProbeError(f"{spec.text}: not attached: the monitor is closing")
                    self._attach_row(row)
        except Exception:
            module.close()
            raise
        group.timings["attach_s"] = time.monotonic() - compiled_at
        group.multi_links = multi
        with self._lock:
            if self._closed:
                module.close()
                raise ProbeError(f"{spec.text}: not attached: the monitor is closing")
            self.modules.append(module)
            for row in rows + refused:
                row.group = group.id
                self.rows[row.id] = row
            group.rows = sorted(rows + refused, key=lambda r: r.name)
            # Processes that joined while these attached (follow() did not see the rows).
            for pid in self._attach_pids():
                missing = [r for r in rows if pid not in r.pids and r.state == "attached"]
                with contextlib.suppress(Exception):
                    self._attach_rows_pid(missing, pid)

    def _new_row(self, spec: ProbeSpec, name: str, path: str, cls: str, slot: int) -> Row:
        with self._lock:
            row = Row(self._next_row, spec, inert(name), path, cls, slot)  # a symbol: any bytes
            self._next_row += 1
        return row

    def _plan_uprobes(
        self, spec: ProbeSpec, path: str, source: str, elf: ElfInfo
    ) -> tuple[list[Row], list[Slot], list[Row]]:
        """The rows to attach, their slots, and the rows refused (state error, with why)."""
        try:
            planned = plan_uprobes(
                spec, path, elf, self._entry_refusal, self._room(), self.pid, source
            )
        except PlanError as exc:
            raise ProbeError(str(exc)) from None
        rows: list[Row] = []
        slots: list[Slot] = []
        refused: list[Row] = []
        for p in planned:
            if p.refused is not None:
                row = self._new_row(spec, p.name, path, p.cost_class, -1)
                row.state, row.error = "error", p.refused
                refused.append(row)
                continue
            slot = Slot(len(slots), "uprobe-entry")
            row = self._new_row(spec, p.name, path, p.cost_class, slot.index)
            row.offset = p.offset
            row.attachments = [
                Attachment(slot.fn_name, source, sym=p.sym, addr=p.addr),
                Attachment(slot.ret_fn_name, source, sym=p.sym, addr=p.addr, ret=True),
            ]
            row.fns = [slot.fn_name, slot.ret_fn_name]
            rows.append(row)
            slots.append(slot)
        return rows, slots, refused

    def _room(self) -> int:
        """Attach points this engine may still add."""
        own = self.max_attach - len(self.rows)
        return own if self.account is None else min(own, self.account.room())

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
            return len(live), sum(1 for g in live if g.spec is not None and g.spec.arg)

    def _entry_refusal(self, insn: entry_safety.EntryInsn) -> str | None:
        """The boot's verdict on a single-stepped first instruction (checked on first use)."""
        if self._entry_policy is None:
            self._entry_policy = entry_safety.policy_for_this_boot()
        return self._entry_policy.refusal(insn)

    def _plan_usdt(
        self, spec: ProbeSpec, path: str, source: str, elf: ElfInfo
    ) -> tuple[list[Row], list[Slot], list[Any]]:
        try:
            plan = plan_usdt(spec, path, elf, self._room())
        except PlanError as exc:
            raise ProbeError(str(exc)) from None
        names, slots, ref_ctrs = plan.names, plan.slots, plan.ref_ctrs
        row = self._new_row(spec, spec.label, path, plan.cost_class, slots[0].index)
        row.fns = [s.fn_name for s in slots]
        row.ref_ctrs = {
            s.fn_name: ref_ctrs[n] for n, s in zip(names, slots, strict=False) if n in ref_ctrs
        }
        if ref_ctrs and not spec.arg:
            # Nothing to read from the probe: bcc's USDT context (which would raise the
            # semaphore itself) is not needed. Every site, from the ELF notes.
            row.attachments = [
                Attachment(s.fn_name, source, addr=p.address, ref_ctr=ref_ctrs.get(n, 0))
                for n, s in zip(names, slots, strict=False)
                for p in plan.sites[n]
            ]
            return [row], slots, []
        # USDT(pid) needs the binary mapped; a command held before exec does not map it
        # yet, so it gets a path context and our PID filter. So does a process in another
        # mount namespace: bcc would resolve its paths inside it, where we cannot attach.
        ref = self._reference_pid()
        mapped = ref is not None and self._maps(ref, path) and not mount_root(ref)
        pid = ref if mapped else None
        if self.pinned is not None:
            # Serving a user: USDT(pid) would open the files the process maps, by path,
            # as root, and write its semaphores. The file the user opened is read instead.
            pid = None
            if ref_ctrs:
                raise ProbeError(
                    f"{spec.text}: reading @arg{spec.arg} of a semaphore-gated probe is not "
                    "offered through the agent (it would write the process's memory as "
                    "root): probe it without @argN, or run adaptyst-top as root"
                )
        if ref_ctrs and pid is None:
            raise ProbeError(
                f"{spec.text}: reading @arg{spec.arg} of a semaphore-gated probe needs the "
                f"process running with {path} mapped: attach with --pid once it runs "
                "(without @argN it works for a command launched here too)"
            )
        assert spec.provider is not None
        try:
            ctx = usdt_context(pid, source, spec.provider, names, slots, ref_ctrs)
        except Exception as exc:
            raise ProbeError(f"{spec.text}: enabling USDT failed: {_one_line(exc)}") from None
        # Filled after loading, from what bcc really attached (it resolves every location).
        row.attachments = []
        row.usdt_ctx = ctx
        return [row], slots, [ctx]

    def _maps(self, pid: int, path: str) -> bool:
        try:
            return path in mapped_files(pid)
        except TargetError:
            return False

    def _reference_pid(self) -> int | None:
        """The process whose view resolves names (library short names, USDT): the target,
        or another live process of the scope once it is gone."""
        if self.pid is not None and pid_alive(self.pid):
            return self.pid
        return next(iter(self._attach_pids()), None) if self.scope else None

    # ----- the processes probed ------------------------------------------------------

    def _attach_pids(self) -> list[int]:
        """The processes to attach for, alive and still the ones that joined; [-1] (every
        process) for node-wide probes."""
        if self.scope is None:
            return [-1]
        return [p for p, start in self.scope.items() if process_start(p) == start]

    def target(self) -> ProbeTarget:
        """What the probes attach to now, for the snapshot."""
        if self.scope is None:
            return ProbeTarget("every process")
        return ProbeTarget(self.scope_name, tuple(sorted(self.scope_pids())))

    def scope_pids(self) -> list[int]:
        """The processes probed now (empty for node-wide probes)."""
        with self._lock:
            return list(self.scope or ())

    def _start_following(self) -> None:
        try:
            follower = ProcessFollower(list(self.scope or ()), self._on_process_event)
        except Exception as exc:  # bcc raises plain Exception (no tracefs, say)
            self.warnings.append(f"children are not followed: {_one_line(exc)}")
            return
        with self._lock:
            if self._closed or self.target_ended:
                follower.close()
                return
            self._follower = follower
            known = list(self.scope or ())
        # The children started before the follower: from /proc, after the kernel's map
        # has the parents (a fork meanwhile is told, and follow() takes a PID once).
        for pid in descendants(known):
            self.follow(pid)

    def _on_process_event(self, ev: ProcessEvent) -> None:
        if ev.kind == "fork":
            if is_thread(ev.pid):
                if self._follower is not None:
                    self._follower.discard(ev.pid)
                return
            self.follow(ev.pid)
        elif ev.kind == "exec" and self.admit is not None:
            # A setuid program may have made it someone else's: asked at once, not at the
            # next guard round.
            if why := self.admit(ev.pid):
                self.unfollow(ev.pid, why)
        elif ev.kind == "exit" and ev.pid != self.pid:
            self.unfollow(ev.pid)

    def follow(self, pid: int) -> bool:
        """Probe PID too (a child of a followed process, a job's new task): every live
        row attaches for it now. False when it is not taken (known, gone, refused)."""
        with self._lock:
            if self.scope is None or self._closed or self.target_ended or pid in self.scope:
                return False
        if self.admit is not None and (why := self.admit(pid)):
            self.warnings.append(f"PID {pid} not probed: {why}")
            return False
        start = process_start(pid)
        with self._lock:
            if start is None or self._closed or self.target_ended or pid in self.scope:
                return False
            if not self.held.hold(pid, start):
                return False
            self.scope[pid] = start
            self.joined += 1
            if self._follower is not None:
                self._follower.add(pid)
            live = [
                row
                for row in self.rows.values()
                if row.state == "attached"
                and row.linked
                and not row.unlinking
                and row.module is not None
                and not row.module.closed
            ]
            with contextlib.suppress(Exception):  # it exited meanwhile
                self._attach_rows_pid(live, pid)
        return True

    def unfollow(self, pid: int, why: str | None = None) -> None:
        """Stop probing PID. With a reason (it is no longer one the user may probe) its
        probes are detached before this returns; otherwise in the background."""
        with self._lock:
            if self.scope is None or self.scope.pop(pid, None) is None:
                return
            self.held.release(pid)
            if self._follower is not None:
                self._follower.discard(pid)
            if why:
                self.warnings.append(f"PID {pid}: {why}; its probes ended")
            rows = [r for r in self.rows.values() if pid in r.pids]
        if why:
            self._detach_pid(rows, pid)
        else:
            self._queue.put(lambda: self._detach_pid(rows, pid))

    def _detach_pid(self, rows: list[Row], pid: int) -> None:
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
                    for a in sorted(row.attachments, key=lambda a: _closes(row, a)):
                        self._detach_one(row.module.bpf, a, pid)
                row.pids.discard(pid)
        for module in multi.values():
            with module.lock, contextlib.suppress(OSError):
                if not module.closed:
                    self._relink(module, pid)

    def _prune_scope(self) -> None:
        """Drop the processes that exited (their PIDs may come back as someone else's)."""
        if self.scope is None:
            return
        for pid, start in list(self.scope.items()):
            if pid != self.pid and process_start(pid) != start:
                self.unfollow(pid)

    # ----- attach / detach / toggle ---------------------------------------------

    def _attach_row(self, row: Row) -> None:
        assert row.module is not None
        ctx = row.usdt_ctx
        if ctx is not None and not row.attachments:
            # Every location of every probe of the spec, as bcc resolved them.
            for binpath, fn_name, addr, _pid in ctx.enumerate_active_probes():
                fn = fn_name.decode() if isinstance(fn_name, bytes) else fn_name
                if fn in row.fns:
                    path = binpath.decode() if isinstance(binpath, bytes) else binpath
                    ref = row.ref_ctrs.get(fn, 0)
                    row.attachments.append(Attachment(fn, path, addr=int(addr), ref_ctr=ref))
        pids = self._attach_pids()
        if not pids and self.pid is not None:
            raise ProbeError(f"PID {self.pid} exited during attach")
        try:
            for pid in pids:
                try:
                    self._attach_pid(row, pid)
                except Exception:
                    if pid in (self.pid, -1) or pid_alive(pid):
                        raise
                    # a followed process that exited meanwhile: nothing to attach
        except Exception as exc:
            for pid in list(row.pids):
                self._detach_pid([row], pid)
            if self.pid is not None and not pid_alive(self.pid):
                raise ProbeError(f"PID {self.pid} exited during attach") from None
            raise ProbeError(
                f"attaching {row.name} in {row.path} failed: {_one_line(exc)}"
            ) from None
        row.state, row.linked = "attached", True

    def _attach_multi(self, module: ProbeModule, spec: ProbeSpec) -> None:
        """Every row of a multi-link module for every process probed: one link per
        process and direction, whatever the number of functions."""
        pids = self._attach_pids()
        if not pids and self.pid is not None:
            raise ProbeError(f"PID {self.pid} exited during attach")
        for pid in pids:
            try:
                self._attach_rows_pid(module.rows, pid)
            except Exception as exc:
                if pid in (self.pid, -1) or pid_alive(pid):
                    if self.pid is not None and not pid_alive(self.pid):
                        raise ProbeError(f"PID {self.pid} exited during attach") from None
                    raise ProbeError(f"attaching {spec.text} failed: {_one_line(exc)}") from None
        for row in module.rows:
            if row.state != "error":
                row.state, row.linked = "attached", True

    def _attach_rows_pid(self, rows: list[Row], pid: int) -> None:
        """ROWS for one more process: a multi-link module's in one relink."""
        modules: dict[int, ProbeModule] = {}
        for row in rows:
            assert row.module is not None
            if row.module.multi is None:
                self._attach_pid(row, pid)
            else:
                row.pids.add(pid)
                modules[id(row.module)] = row.module
        for module in modules.values():
            try:
                self._relink(module, pid)
            except Exception:
                for row in rows:
                    if row.module is module:
                        row.pids.discard(pid)
                raise

    def _relink(self, module: ProbeModule, pid: int) -> None:
        """Make a multi-link module's links for PID cover its rows probed there; a row
        whose offset the kernel refused ends in error, gated, and the rest go on."""
        assert module.multi is not None
        wanted = {r.slot: r.offset for r in module.rows if pid in r.pids and r.offset is not None}
        for slot, why in module.multi.relink(pid, wanted).items():
            row = module.by_slot[slot]
            self._set_gate(row, off=True)
            row.pids.clear()
            row.state, row.error, row.linked = "error", f"{row.name}: {why}", False

    def _attach_pid(self, row: Row, pid: int) -> None:
        """Every attach point of ROW for one process (-1: every process), or none."""
        assert row.module is not None
        if row.module.multi is not None:
            self._attach_rows_pid([row], pid)
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
            for a in sorted(row.attachments, key=lambda a: not _closes(row, a)):
                kw: dict[str, Any] = {"name": a.path, "fn_name": a.fn_name, "pid": pid}
                if a.sym:
                    kw["sym"] = a.sym
                else:
                    kw["addr"] = a.addr
                if a.ref_ctr:
                    attach_with_semaphore(bpf, a.path, a.addr, a.fn_name, pid, a.ref_ctr)
                else:
                    (bpf.attach_uretprobe if a.ret else bpf.attach_uprobe)(**kw)
                done.append(a)
        except Exception:
            for a in done:
                self._detach_one(bpf, a, pid)
            raise
        row.pids.add(pid)

    def _detach_one(self, bpf: Any, a: Attachment, pid: int) -> None:
        kw: dict[str, Any] = {"name": a.path, "pid": pid}
        if a.sym:
            kw["sym"] = a.sym
        else:
            kw["addr"] = a.addr
        with contextlib.suppress(Exception):
            (bpf.detach_uretprobe if a.ret else bpf.detach_uprobe)(**kw)

    def _set_gate(self, row: Row, off: bool) -> None:
        assert row.module is not None
        gate = row.module.bpf["gate"]
        gate[ctypes.c_int(row.slot)] = ctypes.c_ubyte(1 if off else 0)

    def _unlink(self, row: Row) -> None:
        """Detach for real (the kernel takes ~0.1 s per uprobe); runs off the caller's thread
        and without the engine lock, so that reads and toggles go on meanwhile."""
        with self._lock:
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
                        self._relink(row.module, pid)
            elif not row.module.closed:
                # Openers first, for the same reason: no entry without its return.
                for pid in list(row.pids):
                    for a in sorted(row.attachments, key=lambda a: _closes(row, a)):
                        self._detach_one(row.module.bpf, a, pid)
                row.pids.clear()
        with self._lock:
            row.linked = row.unlinking = False
            if row.state == "attached" and not row.module.closed:
                # Switched back on while the detach ran: attach again, then open the gate.
                try:
                    self._attach_row(row)
                    self._set_gate(row, off=False)
                except ProbeError as exc:
                    row.state, row.error = "error", str(exc)

    def _switch_off(self, row: Row, state: str) -> None:
        if row.module is not None and not row.module.closed and row.state == "attached":
            self._set_gate(row, off=True)  # effective at once
            self._queue.put(lambda: self._unlink(row))
        row.state = state

    def set_enabled(self, row_id: int, enabled: bool) -> None:
        """Switch a known row on or off: a map write now, never a recompilation."""
        with self._lock:
            row = self.rows[row_id]
            if (
                self._closed
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
                    self._attach_row(row)
                self._set_gate(row, off=False)
            elif not enabled and row.state == "attached":
                self._switch_off(row, "detached")

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
        with self._lock:
            group = next((g for g in self.groups if g.id == ref.group), None)
        if group is None:
            raise ProbeError("this probe was already removed")
        self.remove_group(group)
        return group.spec_text

    def remove_group(self, group: ProbeGroup) -> None:
        with self._lock:
            for row in group.rows:
                self._switch_off(row, "detached")
                self.rows.pop(row.id, None)
            modules = {id(r.module): r.module for r in group.rows if r.module}
            for m in modules.values():
                if m is not None and all(r.id not in self.rows for r in m.rows):
                    m.close()
                    self.modules.remove(m)
            if group in self.groups:
                self.groups.remove(group)

    # ----- reading -----------------------------------------------------------------

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
            f"the budget of {self.budget:.1%}; costliest: {worst.name}"
        )
        if self.enforce_budget and worst.state == "attached":
            self._switch_off(worst, "detached")
            msg += " (disabled)"
        self.warnings.append(msg)

    def _check_target(self) -> None:
        """End the probes when no process of the target is left; notice an exec."""
        self._prune_scope()
        main_alive = self.pid is not None and pid_alive(self.pid)
        others = [p for p in self.scope or () if p != self.pid]
        if main_alive:
            self._check_exec()
        elif self.pid is not None and not others:
            self._end_target(f"target PID {self.pid} exited")
        elif self.pid is not None and not self._main_gone_told:
            self._main_gone_told = True
            self.warnings.append(
                f"target PID {self.pid} exited; the {len(others)} process(es) it started "
                "are still probed"
            )
        elif self.pid is None and self.scope is not None and not self.scope:
            self._end_target(f"{self.scope_name} has no process left")

    def _check_exec(self) -> None:
        """A target that exec'd another program keeps its PID but not its probes: the rows
        on files it no longer maps end, with the reason."""
        assert self.pid is not None
        try:
            link = os.readlink(f"/proc/{self.pid}/exe")
        except OSError:
            return
        if link == self._exe_link:
            return  # nothing exec'd since the last tick: no path to resolve
        self._exe_link = link
        exe = os.path.realpath(link)
        if self._exe is None:
            if self.command_path is not None and exe == os.path.realpath(sys.executable):
                return  # a launched command still held at the door (the gate is Python)
            self._exe = exe
            return
        if exe == self._exe:
            return
        self._exe = exe
        try:
            mapped = set(mapped_files(self.pid))
        except TargetError:
            return
        gone = [r for r in self.rows.values() if r.path not in mapped and r.state != "error"]
        for row in gone:
            if row.state in ("attached", "detached"):
                self._switch_off(row, "ended")
            row.error = f"PID {self.pid} exec'd {exe}: {row.path} is no longer mapped"
        self.warnings.append(
            f"PID {self.pid} exec'd {exe}: {len(gone)} probe(s) on the old program ended"
        )

    def _end_target(self, why: str) -> None:
        self.target_ended = True
        if self._follower is not None:
            self._follower.close()
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

    # ----- reporting -------------------------------------------------------------

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

    # ----- life cycle ---------------------------------------------------------------

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


def _closes(row: Row, a: Attachment) -> bool:
    """Whether A's program closes an interval (a return, or the END of a USDT pair)."""
    return a.ret or (row.spec.is_pair and a.fn_name == row.fns[-1])


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__


__all__ = ["ProbeEngine", "ProbeError", "ProbeGroup", "Row"]
