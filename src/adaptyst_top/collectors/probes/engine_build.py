"""The probe engine's background work: a spec resolved, planned, compiled, loaded and
attached, one at a time on the compiler thread."""

from __future__ import annotations

import contextlib
import time
from functools import partial

from adaptyst_top.collectors.probes import entry_safety
from adaptyst_top.collectors.probes.bcc_extras import (
    bcc_stderr_captured,
)
from adaptyst_top.collectors.probes.bpf_program import (
    MULTI_ENTRY,
    MULTI_RETURN,
    module_source,
)
from adaptyst_top.collectors.probes.compile_turns import COMPILE_TURNS
from adaptyst_top.collectors.probes.elf_info import ElfInfo, ElfReader, NotELFError, read_elf
from adaptyst_top.collectors.probes.engine_scope import EngineScope
from adaptyst_top.collectors.probes.kinds import kind_of
from adaptyst_top.collectors.probes.model import (
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
        kind = kind_of(spec)
        with self.account.planning if self.account else contextlib.nullcontext():
            plan = kind.plan(self, spec, path, source, elf)
        rows, slots, refused = plan.rows, plan.slots, plan.refused
        multi = self.multi_links and plan.multi_links
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
            kind.loaded(module, spec, source, elf)
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

    def new_row(self, spec: ProbeSpec, name: str, path: str, cls: str, slot: int) -> Row:
        with self._lock:
            row = Row(self._next_row, spec, inert(name), path, cls, slot)  # a symbol: any bytes
            self._next_row += 1
        return row

    def room(self) -> int:
        """Attach points this engine may still add."""
        own = self.max_attach - len(self.rows)
        return own if self.account is None else min(own, self.account.room())

    def entry_refusal(self, insn: entry_safety.EntryInsn) -> str | None:
        """The boot's verdict on a single-stepped first instruction (checked on first use)."""
        if self._entry_policy is None:
            self._entry_policy = entry_safety.policy_for_this_boot()
        return self._entry_policy.refusal(insn)
