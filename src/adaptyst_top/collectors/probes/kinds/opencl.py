"""opencl:KERNEL: the device's own time of each OpenCL kernel launch whose name matches
the glob KERNEL, and of buffer transfers (named [read], [write], [copy]), for a command
the monitor launches.

The command runs with the tool's OpenCL layer (opencl_layer.c, through OPENCL_LAYERS):
its queues profile, and each completed launch fires the layer's one USDT site with the
kernel's name and END - START. A program here files that time under the name, so a row
is a kernel: launches counted exactly, device time as a latency. The layer does nothing
but forward while no probe holds its semaphore."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
from fnmatch import fnmatchcase

from adaptyst_top.collectors.probes import overhead as ov
from adaptyst_top.collectors.probes import usdt_args
from adaptyst_top.collectors.probes.attach_plan import PlanError, plan_usdt
from adaptyst_top.collectors.probes.elf_info import ElfInfo, UsdtProbe
from adaptyst_top.collectors.probes.kinds.base import Plan, PlanContext, ProbeKindDef
from adaptyst_top.collectors.probes.kinds.usdt import site_attachments
from adaptyst_top.collectors.probes.model import ProbeError
from adaptyst_top.collectors.probes.spec import Key, KeyRules, ProbeSpec, ProbeSpecError
from adaptyst_top.snapshot import ProbeKey

LAYER_MODULE = "adaptyst_top.collectors.probes.kinds._opencl_layer"
PROVIDER, SITE = "adaptyst_cl", "kernel"
SITE_ARGS = 4  # name, device_ns, queued_ns, enqueue_ns (opencl_layer.c)
LAYERS_ENV = "OPENCL_LAYERS"
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
        try:
            planned = plan_usdt(spec, path, elf, ctx.room())
            value = _device_time_reader(planned.sites[SITE], path)
        except PlanError as exc:
            raise ProbeError(str(exc)) from None
        slot = dataclasses.replace(planned.slots[0], role="usdt-value", value=value)
        planned = dataclasses.replace(planned, slots=[slot])
        row = ctx.new_row(spec, spec.label, path, ov.OPENCL_KERNEL, slot.index)
        row.fns = slot.fn_names
        row.attachments = site_attachments(planned, source, elf)
        return Plan([row], [slot])

    def entry_name(self, spec: ProbeSpec, row_name: str, key: ProbeKey) -> str | None:
        if key is None:
            return row_name  # nothing launched yet: the probe itself
        name = str(key)
        return name if fnmatchcase(name, spec.func or "*") else None

    def launch_env(self, env: dict[str, str]) -> dict[str, str]:
        layer = layer_path()
        if layer is None:
            return {}
        others = [p for p in env.get(LAYERS_ENV, "").split(":") if p and p != layer]
        return {LAYERS_ENV: ":".join([*others, layer])}


def _device_time_reader(sites: list[UsdtProbe], path: str) -> str:
    """The C that reads the site's device time (its second argument), where every site
    keeps it in one place; PlanError for a site that is not the layer's."""
    where = {p.arg_specs[1] for p in sites if len(p.arg_specs) == SITE_ARGS}
    if len(where) != 1 or any(len(p.arg_specs) != SITE_ARGS for p in sites):
        raise PlanError(f"{path}: its {PROVIDER}:{SITE} site is not the OpenCL layer's")
    try:
        return usdt_args.reader(usdt_args.parse_arg(where.pop()))
    except usdt_args.ArgError as exc:
        raise PlanError(f"{path}: the device time of {PROVIDER}:{SITE}: {exc}") from None
