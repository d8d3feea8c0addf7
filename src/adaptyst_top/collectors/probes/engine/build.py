"""The probe engine's compiler thread: each spec resolved, planned by its kind, compiled,
loaded and attached, one at a time, and the detaches queued behind them."""

from __future__ import annotations

import contextlib
import threading
import time
from functools import partial

from adaptyst_top.collectors.probes.bpf.module_object import EXIT, core_plan, load_module
from adaptyst_top.collectors.probes.bpf.program import (
    MULTI_AFTER,
    MULTI_ENTRY,
    MULTI_RETURN,
)
from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo, ElfReader, NotELFError, read_elf
from adaptyst_top.collectors.probes.engine.attach import Attacher
from adaptyst_top.collectors.probes.engine.attach_account import AttachAccount
from adaptyst_top.collectors.probes.engine.scope import Scope
from adaptyst_top.collectors.probes.engine.state import WORKER_JOIN_S, EngineState
from adaptyst_top.collectors.probes.engine.uprobe_multi import MultiLinks
from adaptyst_top.collectors.probes.kinds import kind_of
from adaptyst_top.collectors.probes.model import ProbeError, ProbeGroup, ProbeModule, Row, one_line
from adaptyst_top.collectors.probes.safety import entry_safety
from adaptyst_top.collectors.probes.safety.confinement import Confinement
from adaptyst_top.collectors.probes.spec import ProbeSpec, ProbeSpecError
from adaptyst_top.system.pinned_files import PinnedFiles
from adaptyst_top.system.targets import TargetError, resolve_target


class Builder:
    """What a spec is built with (ProbeEngine.__init__ says what each means), and the
    thread that builds it; the PlanContext its kind plans in."""

    def __init__(
        self,
        state: EngineState,
        scope: Scope,
        attacher: Attacher,
        *,
        command_path: str | None,
        max_attach: int,
        entry_policy: entry_safety.EntryPolicy | None,
        multi_links: bool,
        account: AttachAccount | None,
        confine: Confinement | None,
        oncpu: int | None,
        pinned: PinnedFiles | None,
        by_process: bool = False,
    ) -> None:
        self.state = state
        self.scope = scope
        self.attacher = attacher
        self.command_path = command_path
        self.max_attach = max_attach
        # Which first instructions may carry a probe; the boot's verdicts by default,
        # looked up (or checked) when the first single-stepped attach point comes.
        self._entry_policy = entry_policy
        self.multi_links = multi_links
        self.account = account
        self.confine = confine
        self.oncpu = oncpu  # where task_struct keeps run time; None: no on-CPU time (no BTF)
        self.pinned = pinned
        self.by_process = by_process  # each process's statistics apart (a job's ranks)
        self._thread = threading.Thread(target=self._work, name="probe-compiler", daemon=True)
        self._thread.start()

    def on_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def join(self) -> None:
        """Until the thread ended (close() queued its stop), WORKER_JOIN_S at most."""
        if not self.on_thread():
            self._thread.join(WORKER_JOIN_S)

    def _work(self) -> None:
        """The compiler thread: each spec in turn, and the work queued behind them."""
        while True:
            group = self.state.queue.get()
            if group is None:
                # Closed: no build reads the files after this, and module.close() detaches
                # without naming them (a toggle would: it is queued here, never after).
                if self.pinned is not None:
                    with self.state.lock:  # a toggle attaching now (by the file) ends first
                        self.pinned.close()
                return
            if not isinstance(group, ProbeGroup):
                with contextlib.suppress(Exception):
                    group()
                continue
            if self.state.closed:  # queued behind a close: never compiled (its client left)
                group.state, group.error = "error", f"{group.spec_text}: not attached: closed"
                group.done.set()
                continue
            group.state = "compiling"
            try:
                self._build(group)
                group.state = "attached"
            except (ProbeError, TargetError, ProbeSpecError, NotELFError, FileNotFoundError) as exc:
                group.state, group.error = "error", str(exc).splitlines()[0]
            except Exception as exc:  # bcc raises plain Exception; keep the engine alive
                group.state, group.error = "error", one_line(exc)
            finally:
                if group.state == "error":
                    self.state.warnings.append(group.error)  # the status line's latest word
                group.done.set()

    def _resolve(self, spec: ProbeSpec) -> tuple[str, str, ElfInfo]:
        """(the file's path, the path its bytes are read from, its ELF)."""
        target = kind_of(spec).target_name(spec, self.scope.reference_pid())
        if self.command_path and target in (
            self.command_path,
            self.command_path.rsplit("/", 1)[-1],
        ):
            target = self.command_path
        read: ElfReader = read_elf
        if self.pinned is not None:
            path, source = self.pinned.source(target)
            read = self.pinned.read or read_elf
        else:
            path = source = resolve_target(target, self.scope.reference_pid())
        return path, source, read(source)

    def _build(self, group: ProbeGroup) -> None:
        spec = group.spec
        assert spec is not None
        started = time.monotonic()
        kind = kind_of(spec)
        if (instead := kind.instead(self, spec)) is not None:
            spec, why = instead
            self.state.warnings.append(why)
            kind = kind_of(spec)
        path, source, elf = self._resolve(spec)
        with self.account.planning if self.account else contextlib.nullcontext():
            plan = kind.plan(self, spec, path, source, elf)
        rows, slots, refused = plan.rows, plan.slots, plan.refused
        multi = self.multi_links and plan.multi_links
        group.planned = len(rows)
        group.timings["plan_s"] = (planned_at := time.monotonic()) - started
        if kind.bpf_object is None:
            raise ProbeError(f"{spec.text}: the {kind.name} kind has no BPF program")
        unplaced = [r.name for r in rows if any(a.offset is None for a in r.attachments)]
        if unplaced:  # where its bytes are in the file is what the kernel attaches at
            raise ProbeError(f"{spec.text}: {unplaced[0]} is not in the file's loaded code")
        plan_c = core_plan(slots)
        try:
            bpf = load_module(
                kind.bpf_object, slots, multi, self.confine, self.oncpu, plan_c, self.by_process
            )
        except OSError as exc:
            raise ProbeError(f"loading probes for {spec.text} failed: {one_line(exc)}") from None
        try:
            links = None
            if multi:
                entry, ret = bpf.funcs[MULTI_ENTRY].fd, bpf.funcs[MULTI_RETURN].fd
                after = bpf.funcs[MULTI_AFTER].fd if MULTI_AFTER in bpf.funcs else None
                links = MultiLinks(source, entry, ret, after)
            # A program per role; the cookie says which probe fired.
            for row in rows:
                for a in row.attachments:
                    a.fn_name, a.cookie = plan_c.programs[a.fn_name]
                row.fns = list(dict.fromkeys(plan_c.programs[f][0] for f in row.fns))
            bpf.attach_program(EXIT)
        except BaseException:
            bpf.cleanup()
            raise
        group.timings["compile_s"] = (compiled_at := time.monotonic()) - planned_at
        module = ProbeModule(bpf, rows, links, self.oncpu is not None, self.by_process)
        if self.scope.starts is not None:  # a key's string is read from the process checked
            module.keys.open_mem = partial(self.scope.held.opened, name="mem")
        for row in rows:
            row.module = module
            if multi:
                row.fns = [MULTI_ENTRY, MULTI_RETURN] + ([MULTI_AFTER] if row.after else [])
        try:
            kind.loaded(module, spec, source, elf)
            if multi:
                self.attacher.attach_multi(module, spec)
            for row in rows if not multi else ():
                if self.state.closed:
                    raise ProbeError(f"{spec.text}: not attached: the monitor is closing")
                self.attacher.attach_row(row)
        except Exception:
            module.close()
            raise
        group.timings["attach_s"] = time.monotonic() - compiled_at
        group.multi_links = multi
        with self.state.lock:
            if self.state.closed:
                module.close()
                raise ProbeError(f"{spec.text}: not attached: the monitor is closing")
            self.state.modules.append(module)
            for row in rows + refused:
                row.group = group.id
                self.state.rows[row.id] = row
            group.rows = sorted(rows + refused, key=lambda r: r.name)
            # Processes that joined while these attached (follow() did not see the rows).
            for pid in self.scope.attach_pids():
                missing = [r for r in rows if pid not in r.pids and r.state == "attached"]
                with contextlib.suppress(Exception):
                    self.attacher.attach_rows_pid(missing, pid)

    @property
    def pid(self) -> int | None:
        return self.scope.pid

    def new_row(self, spec: ProbeSpec, name: str, path: str, cls: str, slot: int) -> Row:
        return self.state.new_row(spec, name, path, cls, slot)

    def proc_file(self, pid: int, name: str) -> int | None:
        return self.scope.held.opened(pid, name)

    def room(self) -> int:
        """Attach points this engine may still add."""
        own = self.max_attach - len(self.state.rows)
        return own if self.account is None else min(own, self.account.room())

    def entry_refusal(self, insn: entry_safety.EntryInsn) -> str | None:
        """The boot's verdict on a single-stepped first instruction (checked on first use)."""
        if self._entry_policy is None:
            self._entry_policy = entry_safety.policy_for_this_boot()
        return self._entry_policy.refusal(insn)
