"""The probe engine's background work: a spec resolved, planned, compiled, loaded and
attached, one at a time on the compiler thread."""

from __future__ import annotations

import contextlib
import time
from functools import partial

from adaptyst_top.collectors.probes import entry_safety
from adaptyst_top.collectors.probes.attach_plan import PlanError, plan_uprobes, plan_usdt
from adaptyst_top.collectors.probes.bcc_extras import (
    bcc_stderr_captured,
)
from adaptyst_top.collectors.probes.binary_strings import binary_strings
from adaptyst_top.collectors.probes.bpf_program import (
    MULTI_ENTRY,
    MULTI_RETURN,
    Slot,
    module_source,
)
from adaptyst_top.collectors.probes.compile_turns import COMPILE_TURNS
from adaptyst_top.collectors.probes.elf_info import ElfInfo, ElfReader, NotELFError, read_elf
from adaptyst_top.collectors.probes.engine_scope import EngineScope
from adaptyst_top.collectors.probes.model import (
    Attachment,
    ProbeError,
    ProbeGroup,
    ProbeModule,
    Row,
    one_line,
)
from adaptyst_top.collectors.probes.spec import ProbeSpec, ProbeSpecError
from adaptyst_top.collectors.probes.uprobe_multi import MultiLinks
from adaptyst_top.snapshot.inert import inert
from adaptyst_top.system.targets import (
    TargetError,
    resolve_target,
)


class EngineBuild(EngineScope):
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
                group.state, group.error = "error", one_line(exc)
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
        read: ElfReader = read_elf
        if self.pinned is not None:
            path, source = self.pinned.source(target)
            read = self.pinned.read or read_elf
        else:
            path = source = resolve_target(target, self._reference_pid())
        return path, source, read(source)

    def _build(self, group: ProbeGroup) -> None:
        spec = group.spec
        assert spec is not None
        started = time.monotonic()
        path, source, elf = self._resolve(spec)
        multi = False
        with self.account.planning if self.account else contextlib.nullcontext():
            if spec.kind == "uprobe":
                rows, slots, refused = self._plan_uprobes(spec, path, source, elf)
                # A keyed spec reads its key in its own programs; multi-links share two.
                multi = (
                    self.multi_links and not spec.keyed and all(r.offset is not None for r in rows)
                )
            else:
                rows, slots = self._plan_usdt(spec, path, source, elf)
                refused = []
            group.planned = len(rows)
        group.timings["plan_s"] = (planned_at := time.monotonic()) - started
        from bcc import BPF  # type: ignore[import-not-found]

        try:
            with COMPILE_TURNS.turn(self.owner):
                text = module_source(slots, multi, self.confine, self.oncpu)
                bpf = BPF(text=text)
            links = MultiLinks(bpf, source, MULTI_ENTRY, MULTI_RETURN) if multi else None
        except ProbeError:
            raise
        except Exception as exc:
            raise ProbeError(f"compiling probes for {spec.text} failed: {one_line(exc)}") from None
        group.timings["compile_s"] = (compiled_at := time.monotonic()) - planned_at
        module = ProbeModule(bpf, rows, links, self.oncpu is not None)
        if self.scope is not None:  # a key's string is read from the process checked
            module.keys.open_mem = partial(self.held.opened, name="mem")
        for row in rows:
            row.module = module
            if multi:
                row.fns = [MULTI_ENTRY, MULTI_RETURN]
        try:
            if spec.kind == "usdt" and spec.arg is not None:
                module.keys.binary = binary_strings(source, elf, spec, slots[0].index)
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
            slot = Slot(len(slots), "uprobe-entry", 0, spec.arg, spec.arg_type, spec.retval)
            row = self._new_row(spec, p.name, path, p.cost_class, slot.index)
            row.offset = p.offset
            row.attachments = [
                Attachment(slot.fn_name, source, sym=p.sym, addr=p.addr, offset=p.offset),
                Attachment(
                    slot.ret_fn_name, source, sym=p.sym, addr=p.addr, ret=True, offset=p.offset
                ),
            ]
            row.fns = [slot.fn_name, slot.ret_fn_name]
            rows.append(row)
            slots.append(slot)
        return rows, slots, refused

    def _room(self) -> int:
        """Attach points this engine may still add."""
        own = self.max_attach - len(self.rows)
        return own if self.account is None else min(own, self.account.room())

    def _entry_refusal(self, insn: entry_safety.EntryInsn) -> str | None:
        """The boot's verdict on a single-stepped first instruction (checked on first use)."""
        if self._entry_policy is None:
            self._entry_policy = entry_safety.policy_for_this_boot()
        return self._entry_policy.refusal(insn)

    def _plan_usdt(
        self, spec: ProbeSpec, path: str, source: str, elf: ElfInfo
    ) -> tuple[list[Row], list[Slot]]:
        try:
            plan = plan_usdt(spec, path, elf, self._room())
        except PlanError as exc:
            raise ProbeError(str(exc)) from None
        names, slots, ref_ctrs = plan.names, plan.slots, plan.ref_ctrs
        row = self._new_row(spec, spec.label, path, plan.cost_class, slots[0].index)
        row.fns = [fn for s in slots for fn in s.fn_names]  # a pair's END last
        # Every site, from the checked notes, at its file offset, to the program that
        # reads its argument where that site has it; a semaphore held up by the kernel
        # (uprobe ref_ctr_offset) while the probe is attached, whatever ends the monitor.
        row.attachments = [
            Attachment(
                s.variant_name(plan.variant.get((n, p.address), 0)),
                source,
                addr=p.address,
                ref_ctr=ref_ctrs.get(n, 0),
                offset=elf.offset_of(p.address),
            )
            for n, s in zip(names, slots, strict=False)
            for p in plan.sites[n]
        ]
        return [row], slots
