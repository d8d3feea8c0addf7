"""opencl:KERNEL: the device's own time of each OpenCL kernel launch whose name matches
the glob KERNEL, and of buffer transfers (named [read], [write], [copy]), for a command
the monitor launches.

The command runs with the tool's OpenCL layer (opencl_layer.c, through OPENCL_LAYERS):
its queues profile; it counts every launch by name and hands the counts over in
batches (adaptyst_cl:launches), and times as many launches as the budget allows, handed
over 64 at a time (adaptyst_cl:timed: each one's name and END - START). Two programs
here file both under the name, so a row is a kernel: launches counted exactly, device
time as a latency over the launches timed. The layer does nothing but forward while no probe holds its
semaphores."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
from fnmatch import fnmatchcase

from adaptyst_top.collectors.probes import overhead as ov
from adaptyst_top.collectors.probes import usdt_args
from adaptyst_top.collectors.probes.attach_plan import PlanError, plan_usdt
from adaptyst_top.collectors.probes.bpf_program import Slot, SlotRole
from adaptyst_top.collectors.probes.elf_info import ElfInfo, UsdtProbe
from adaptyst_top.collectors.probes.kinds.base import Plan, PlanContext, ProbeKindDef
from adaptyst_top.collectors.probes.kinds.uprobe import Uprobe
from adaptyst_top.collectors.probes.kinds.usdt import site_attachments
from adaptyst_top.collectors.probes.model import ProbeError
from adaptyst_top.collectors.probes.spec import Key, KeyRules, ProbeSpec, ProbeSpecError
from adaptyst_top.snapshot import ProbeKey

LAYER_MODULE = "adaptyst_top.collectors.probes.kinds._opencl_layer"
PROVIDER, SITE, LAUNCHES = "adaptyst_cl", "timed", "launches"
# Each site's two arguments (opencl_layer.c): timed(records, n), launches(name, n).
SITE_ARGS = 2
_SITE_ROLES: tuple[tuple[str, SlotRole], ...] = ((SITE, "usdt-batch"), (LAUNCHES, "usdt-add"))
LAYERS_ENV = "OPENCL_LAYERS"
BUDGET_ENV = "ADAPTYST_CL_BUDGET"  # the layer's share of the time for timing
HOST_LOADER, HOST_ENQUEUE = "OpenCL", "clEnqueueNDRangeKernel"  # without the layer
_GLOB = re.compile(r"[A-Za-z0-9_*?\[\]!.-]{1,128}")


def layer_path() -> str | None:
    """The layer's shared library as installed (built with the package), or None."""
    found = importlib.util.find_spec(LAYER_MODULE)
    origin = found.origin if found is not None else None
    return os.path.realpath(origin) if origin else None


class OpenCL(ProbeKindDef):
    name = "opencl"
    shape = "opencl:KERNEL"
    syntax = "opencl:KERNEL"
    what = "device time of OpenCL kernels, for a launched command"
    sampled_latency = True
    host_time = False  # the device's clock: on-CPU only where the device is the CPU
    keys = KeyRules(
        most_args=0,
        why_most="an opencl probe is split by kernel name, not by an argument",
        why_no_retval="an opencl probe has no @retval",
        at_in_names=False,
    )

    def parse(self, spec: str, rest: str, body_start: int, key: Key) -> ProbeSpec:
        if not _GLOB.fullmatch(rest):
            raise ProbeSpecError(
                spec,
                body_start,
                len(rest) or 1,
                "expected a kernel name or glob (A-Z a-z 0-9 _ * ?)",
            )
        layer = layer_path()
        if layer is None:
            raise ProbeSpecError(
                spec,
                0,
                len(spec),
                "this install has no OpenCL layer (built when the OpenCL "
                "headers are there: apt install opencl-c-headers, then install again)",
            )
        return ProbeSpec(
            spec,
            "opencl",
            layer,
            func=rest,
            provider=PROVIDER,
            name=SITE,
            arg=1,
            arg_type="str",
            label=f"opencl:{rest}",
            measures_latency=True,
        )

    def plan(self, ctx: PlanContext, spec: ProbeSpec, path: str, source: str, elf: ElfInfo) -> Plan:
        """One row, two programs: slot 0 on the timed launches' site, slot 1 (filing its
        counts under slot 0's keys and gate) on the counted ones'."""
        row = ctx.new_row(spec, spec.label, path, ov.OPENCL_KERNEL, 0)
        row.count_class = ov.OPENCL_COUNT
        slots: list[Slot] = []
        for index, (site, role) in enumerate(_SITE_ROLES):
            try:
                # Planned unkeyed (no reader of a key argument): the programs read both
                # arguments themselves, the name from a record or from the launches site.
                unkeyed = dataclasses.replace(spec, name=site, arg=None)
                planned = plan_usdt(unkeyed, path, elf, ctx.room())
                args = tuple(_arg_reader(planned.sites[site], site, path, n) for n in (1, 2))
            except PlanError as exc:
                raise ProbeError(str(exc)) from None
            slot = dataclasses.replace(
                planned.slots[0], index=index, role=role, args=args, arg=1, files_as=0
            )
            planned = dataclasses.replace(planned, slots=[slot])
            row.fns += slot.fn_names
            row.attachments += site_attachments(planned, source, elf)
            slots.append(slot)
        return Plan([row], slots)

    def instead(self, ctx: PlanContext, spec: ProbeSpec) -> tuple[ProbeSpec, str] | None:
        """A process started without the layer (--pid): its launches counted, and timed
        on the host, by a uprobe on its OpenCL loader's enqueue."""
        if ctx.pid is None or (why := _not_timed_in(ctx, ctx.pid, spec.target)) is None:
            return None
        host = f"uprobe:{HOST_LOADER}:{HOST_ENQUEUE}"
        rest = f"{HOST_LOADER}:{HOST_ENQUEUE}"
        uprobe = Uprobe().parse(host, rest, len("uprobe:"), Key())
        return uprobe, f"{spec.text}: {why}; its launches are counted from the host ({host})"

    def entry_name(self, spec: ProbeSpec, row_name: str, key: ProbeKey) -> str | None:
        if key is None:
            return row_name  # nothing launched yet: the probe itself
        name = str(key)
        return name if fnmatchcase(name, spec.func or "*") else None

    def launch_env(self, env: dict[str, str], budget: float) -> dict[str, str]:
        layer = layer_path()
        if layer is None:
            return {}
        others = [p for p in env.get(LAYERS_ENV, "").split(":") if p and p != layer]
        # Plain decimals: the layer reads them without the program's locale.
        return {LAYERS_ENV: ":".join([*others, layer]), BUDGET_ENV: f"{float(budget):.9f}"}


def _not_timed_in(ctx: PlanContext, pid: int, layer: str) -> str | None:
    """Why PID's launches cannot reach the layer's sites (started without it), or None:
    it was (a command the monitor launched), or it cannot be told. Read through the
    process as the scope holds it, never by its number (which another may have now)."""
    found = {}
    for name in ("maps", "environ"):
        fd = ctx.proc_file(pid, name)
        if fd is None:
            return None
        with os.fdopen(fd, "rb") as f:
            found[name] = f.read(1 << 22)  # a map of 4 MiB: the layer is among the first
    if any(line.endswith(b" " + os.fsencode(layer)) for line in found["maps"].split(b"\n")):
        return None
    prefix = LAYERS_ENV.encode() + b"="
    for item in found["environ"].split(b"\0"):
        if item.startswith(prefix) and os.fsencode(layer) in item[len(prefix) :].split(b":"):
            return None
    return (
        f"PID {pid} was not started with this tool's OpenCL layer ({layer}): device time "
        "needs a command the monitor launches (-- CMD)"
    )


def _arg_reader(sites: list[UsdtProbe], site: str, path: str, n: int) -> str:
    """The C that reads a site's Nth argument, where every site keeps it in one place
    (one program reads every site); PlanError for a site that is not the layer's."""
    where = {p.arg_specs[n - 1] for p in sites if len(p.arg_specs) == SITE_ARGS}
    if len(where) != 1 or any(len(p.arg_specs) != SITE_ARGS for p in sites):
        raise PlanError(f"{path}: its {PROVIDER}:{site} site is not the OpenCL layer's")
    try:
        return usdt_args.reader(usdt_args.parse_arg(where.pop()))
    except usdt_args.ArgError as exc:
        raise PlanError(f"{path}: {PROVIDER}:{site}'s argument {n}: {exc}") from None
