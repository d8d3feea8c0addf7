"""usdt:TARGET:PROVIDER:NAME[..END][@argN]: one static probe's hits, or the latency from
BEGIN to the matching END per thread (nested pairs last-in, first-out)."""

from __future__ import annotations

from types import MappingProxyType

from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.cost.class_cost import ClassCost
from adaptyst_top.collectors.probes.elf.binary_strings import binary_strings
from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo
from adaptyst_top.collectors.probes.engine.attach_plan import PlanError, PlannedUsdt, plan_usdt
from adaptyst_top.collectors.probes.kinds.base import (
    CalibrationCase,
    Plan,
    PlanContext,
    ProbeKindDef,
)
from adaptyst_top.collectors.probes.model import Attachment, ProbeError, ProbeModule
from adaptyst_top.collectors.probes.spec import IDENT, Key, KeyRules, ProbeSpec, ProbeSpecError

USDT_ARGS = 12  # what sys/sdt.h gives a probe


def site_attachments(plan: PlannedUsdt, source: str, elf: ElfInfo) -> list[Attachment]:
    """Every site, from the checked notes, at its file offset, to the program that reads
    its argument where that site has it; a semaphore held up by the kernel (uprobe
    ref_ctr_offset) while the probe is attached, whatever ends the monitor."""
    return [
        Attachment(
            s.variant_name(plan.variant.get((n, p.address), 0)),
            source,
            addr=p.address,
            ref_ctr=plan.ref_ctrs.get(n, 0),
            offset=elf.offset_of(p.address),
        )
        for n, s in zip(plan.names, plan.slots, strict=False)
        for p in plan.sites[n]
    ]


class Usdt(ProbeKindDef):
    name = "usdt"
    shape = "usdt:TARGET:PROVIDER:NAME"
    bpf_object = "usdt.bpf.o"
    syntax = "usdt:TARGET:PROVIDER:NAME[..END][@argN]"
    what = "a static probe site"
    keys = KeyRules(
        most_args=USDT_ARGS,
        why_most=f"USDT has arguments 1..{USDT_ARGS}",
        why_no_retval="a USDT probe has no @retval",
        at_in_names=False,
    )
    cost_classes = MappingProxyType(
        {
            ov.USDT: ClassCost(850.0, 0.0, "default"),
            ov.USDT_PAIR: ClassCost(1700.0, 850.0, "default"),
            ov.USDT_OPTIMIZED: ClassCost(850.0, 0.0, "default"),
            ov.USDT_PAIR_OPTIMIZED: ClassCost(1700.0, 850.0, "default"),
        }
    )
    calibration = (
        CalibrationCase(ov.USDT, "usdt", "usdt:{bin}:adaptyst_cal:hit", 40000),
        CalibrationCase(ov.USDT_PAIR, "pair", "usdt:{bin}:adaptyst_cal:begin..end", 30000),
        CalibrationCase(ov.USDT_OPTIMIZED, "usdt5", "usdt:{bin}:adaptyst_cal:hit5", 40000),
        CalibrationCase(
            ov.USDT_PAIR_OPTIMIZED, "pair5", "usdt:{bin}:adaptyst_cal:begin5..end5", 30000
        ),
    )

    def parse(self, spec: str, rest: str, body_start: int, key: Key) -> ProbeSpec:
        parts = rest.rsplit(":", 2)
        if len(parts) != 3 or not parts[0]:
            raise ProbeSpecError(spec, body_start, len(rest), f"expected {self.shape}")
        target, provider, name = parts
        prov_col = body_start + len(target) + 1
        if not IDENT.match(provider):
            raise ProbeSpecError(spec, prov_col, len(provider) or 1, "bad USDT provider")
        name_col = prov_col + len(provider) + 1
        end: str | None = None
        if ".." in name:
            name, _, end = name.partition("..")
            if not IDENT.match(end):
                raise ProbeSpecError(
                    spec, name_col + len(name) + 2, len(end) or 1, "bad END probe name"
                )
        if not IDENT.match(name):
            raise ProbeSpecError(spec, name_col, len(name) or 1, "bad USDT probe name")
        probe = f"{name}..{end}" if end else name
        return ProbeSpec(
            spec,
            "usdt",
            target,
            provider=provider,
            name=name,
            end=end,
            arg=key.arg,
            arg_type=key.arg_type,
            label=f"{provider}:{probe}",
            measures_latency=end is not None,
        )

    def plan(self, ctx: PlanContext, spec: ProbeSpec, path: str, source: str, elf: ElfInfo) -> Plan:
        try:
            plan = plan_usdt(spec, path, elf, ctx.room())
        except PlanError as exc:
            raise ProbeError(str(exc)) from None
        slots = plan.slots
        row = ctx.new_row(spec, spec.label, path, plan.cost_class, slots[0].index)
        row.fns = [fn for s in slots for fn in s.fn_names]  # a pair's END last
        row.attachments = site_attachments(plan, source, elf)
        return Plan([row], slots)

    def loaded(self, module: ProbeModule, spec: ProbeSpec, source: str, elf: ElfInfo) -> None:
        if spec.arg is not None:  # a string argument read from the binary's own strings
            module.keys.binary = binary_strings(source, elf, spec, module.rows[0].slot)

    def shown_name(self, name: str) -> str:
        # The provider is in the spec and the detail view.
        return name.split(":", 1)[1] if ":" in name else name
