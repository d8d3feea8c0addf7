"""uprobe:TARGET:FUNC[@argN|@retval]: each matching function's entry-to-return latency."""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import ClassVar

from adaptyst_top.collectors.probes.bpf.program import Slot
from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.cost.class_cost import ClassCost
from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo
from adaptyst_top.collectors.probes.engine.attach_plan import PlanError, plan_uprobes
from adaptyst_top.collectors.probes.kinds.base import (
    CalibrationCase,
    Plan,
    PlanContext,
    ProbeKindDef,
)
from adaptyst_top.collectors.probes.model import Attachment, ProbeError, Row
from adaptyst_top.collectors.probes.spec import Key, KeyRules, ProbeSpec, ProbeSpecError
from adaptyst_top.snapshot.probes import ProbeKind

UPROBE_ARGS = 6  # x86-64's integer argument registers: what a uprobe's entry can read
MAX_GLOB = 4096  # a function glob's characters (the longest C++ names are a few hundred)
# A symbol or a demangled name (C++ `ns::Class::method`, templates, destructors); with
# spaces or parentheses it is quoted.
_GLOB = re.compile(r"^[A-Za-z0-9_.$*?\[\]!@:<>~,&+{}-]+$")
_SINGLE_COLON = re.compile(r"(?<!:):(?!:)")


def _split_function(rest: str) -> tuple[str, str, str]:
    """TARGET and FUNC at the last colon that is not part of a C++ `::` (outside quotes)."""
    quote = rest.find('"')
    scan = rest if quote < 0 else rest[:quote]
    last = None
    for m in _SINGLE_COLON.finditer(scan):
        last = m.start()
    if last is None:
        return rest, "", ""
    return rest[:last], ":", rest[last + 1 :]


class Uprobe(ProbeKindDef):
    name: ClassVar[ProbeKind] = "uprobe"
    aliases: ClassVar[tuple[str, ...]] = ("u",)
    shape = "uprobe:TARGET:FUNC"
    syntax = "uprobe:TARGET:FUNC[@argN|@retval]"
    what = "a function's entry and return"
    keys = KeyRules(
        most_args=UPROBE_ARGS,
        why_most=f"a uprobe reads arguments 1..{UPROBE_ARGS} (those in registers)",
        why_no_retval=None,
        at_in_names=True,
    )
    bpf_object = "uprobe.bpf.o"
    cost_classes = MappingProxyType(
        {
            ov.EMULATED: ClassCost(1500.0, 700.0, "default"),
            ov.SINGLESTEP: ClassCost(14700.0, 13000.0, "default"),
            ov.SINGLESTEP_RETIMED: ClassCost(16200.0, 700.0, "default"),
            ov.UPROBE_OPTIMIZED: ClassCost(1500.0, 700.0, "default"),
            ov.UNKNOWN: ClassCost(14700.0, 13000.0, "default"),
        }
    )
    calibration: ClassVar[tuple[CalibrationCase, ...]] = (
        CalibrationCase(ov.EMULATED, "push", "uprobe:{bin}:cal_push", 40000),
        CalibrationCase(ov.SINGLESTEP, "lea", "uprobe:{bin}:cal_lea", 6000),
        CalibrationCase(ov.SINGLESTEP_RETIMED, "lea_nop", "uprobe:{bin}:cal_lea_nop", 6000),
        CalibrationCase(ov.UPROBE_OPTIMIZED, "nop5", "uprobe:{bin}:cal_nop5", 40000),
    )

    def parse(self, spec: str, rest: str, body_start: int, key: Key) -> ProbeSpec:
        target, sep, func = _split_function(rest)
        if not sep or not target:
            raise ProbeSpecError(spec, body_start, len(rest), f"expected {self.shape}")
        if len(func) > 2 and func[0] == func[-1] == '"' and '"' not in func[1:-1]:
            func = func[1:-1]  # quoted: a demangled name with spaces, "ns::f(int, char)"
        elif not func or len(func) > MAX_GLOB or not _GLOB.match(func):
            raise ProbeSpecError(
                spec, body_start + len(target) + 1, len(func) or 1, "bad function glob"
            )
        return ProbeSpec(
            spec,
            "uprobe",
            target,
            func=func,
            arg=key.arg,
            arg_type=key.arg_type,
            retval=key.retval,
            label=func,
            measures_latency=True,
        )

    def plan(self, ctx: PlanContext, spec: ProbeSpec, path: str, source: str, elf: ElfInfo) -> Plan:
        try:
            planned = plan_uprobes(
                spec,
                path,
                elf,
                ctx.entry_refusal,
                ctx.room(),
                ctx.pid,
                source,
                beside=ctx.confine is None,
            )
        except PlanError as exc:
            raise ProbeError(str(exc)) from None
        rows: list[Row] = []
        slots: list[Slot] = []
        refused: list[Row] = []
        for p in planned:
            if p.refused is not None:
                row = ctx.new_row(spec, p.name, path, p.cost_class, -1)
                row.state, row.error = "error", p.refused
                refused.append(row)
                continue
            slot = Slot(
                len(slots),
                "uprobe-entry",
                0,
                spec.arg,
                spec.arg_type,
                spec.retval,
                retimed=p.after is not None,
            )
            row = ctx.new_row(spec, p.name, path, p.cost_class, slot.index)
            row.offset, row.after = p.offset, p.after
            row.attachments = [
                Attachment(slot.fn_name, source, sym=p.sym, addr=p.addr, offset=p.offset),
                Attachment(
                    slot.ret_fn_name, source, sym=p.sym, addr=p.addr, ret=True, offset=p.offset
                ),
            ]
            row.fns = [slot.fn_name, slot.ret_fn_name]
            if p.after is not None:  # where the interval starts again (entry_retime.py)
                row.attachments.append(Attachment(slot.after_fn_name, source, offset=p.after))
                row.fns.append(slot.after_fn_name)
            rows.append(row)
            slots.append(slot)
        # A keyed spec reads its key in its own programs; multi-links share two.
        multi = not spec.keyed and all(r.offset is not None for r in rows)
        return Plan(rows, slots, refused, multi)
