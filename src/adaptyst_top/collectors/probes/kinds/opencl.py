"""opencl:KERNEL: the device's own time of each OpenCL kernel launch whose name matches
the glob KERNEL, and of buffer transfers (named [read], [write], [copy]), for a command
the monitor launches.

The command runs with the tool's OpenCL layer (opencl_layer.c, through OPENCL_LAYERS):
its queues profile; it counts every launch by name and hands the counts over in
batches (adaptyst_cl:launches), and times as many launches as the budget allows, handed
over 64 at a time (adaptyst_cl:timed: each one's name and END - START); device_layer
says how a row is made of them. The layer does nothing but forward while no probe holds
its semaphores."""

from __future__ import annotations

from types import MappingProxyType

from adaptyst_top.collectors.probes.cost.class_cost import ClassCost
from adaptyst_top.collectors.probes.kinds.base import PlanContext
from adaptyst_top.collectors.probes.kinds.device_layer import (
    TIMED,
    DeviceLayerKind,
    library_path,
)
from adaptyst_top.collectors.probes.kinds.uprobe import Uprobe
from adaptyst_top.collectors.probes.spec import Key, ProbeSpec

LAYER_MODULE = "adaptyst_top.collectors.probes.kinds._opencl_layer"
PROVIDER, SITE = "adaptyst_cl", TIMED
LAYERS_ENV = "OPENCL_LAYERS"
BUDGET_ENV = "ADAPTYST_CL_BUDGET"  # the layer's share of the time for timing
HOST_LOADER, HOST_ENQUEUE = "OpenCL", "clEnqueueNDRangeKernel"  # without the layer


def layer_path() -> str | None:
    """The layer's shared library as installed (built with the package), or None."""
    return library_path(LAYER_MODULE)


class OpenCL(DeviceLayerKind):
    name = "opencl"
    shape = "opencl:KERNEL"
    syntax = "opencl:KERNEL"
    what = "device time of OpenCL kernels, for a launched command"
    module = LAYER_MODULE
    provider = PROVIDER
    # A launch timed through the layer (the event's callback, a reference to it and one
    # USDT hit, none of it inside the device's own start-to-end), and one only counted
    # (an atomic add, a probe hit per batch): bench_opencl_kernels, what each adds.
    timed_class = "opencl-kernel"
    counted_class = "opencl-count"
    cost_classes = MappingProxyType(
        {
            timed_class: ClassCost(470.0, 0.0, "default"),
            counted_class: ClassCost(110.0, 0.0, "default"),
        }
    )
    device = "OpenCL device"
    noun = "OpenCL layer"
    missing = (
        "this install has no OpenCL layer (built when the OpenCL "
        "headers are there: apt install opencl-c-headers, then install again)"
    )

    def instead(self, ctx: PlanContext, spec: ProbeSpec) -> tuple[ProbeSpec, str] | None:
        """A process started without the layer (--pid): its launches counted, and timed
        on the host, by a uprobe on its OpenCL loader's enqueue."""
        if ctx.pid is None:
            return None
        if (why := self.not_loaded_in(ctx, ctx.pid, spec.target, LAYERS_ENV)) is None:
            return None
        host = f"uprobe:{HOST_LOADER}:{HOST_ENQUEUE}"
        rest = f"{HOST_LOADER}:{HOST_ENQUEUE}"
        uprobe = Uprobe().parse(host, rest, len("uprobe:"), Key())
        return uprobe, f"{spec.text}: {why}; its launches are counted from the host ({host})"

    def instead_targets(self, spec: ProbeSpec) -> tuple[str, ...]:
        return (HOST_LOADER,)

    def launch_env(
        self, env: dict[str, str], budget: float, spec: ProbeSpec | None = None
    ) -> dict[str, str]:
        layer = layer_path()
        if layer is None:
            return {}
        others = [p for p in env.get(LAYERS_ENV, "").split(":") if p and p != layer]
        # Plain decimals: the layer reads them without the program's locale.
        return {LAYERS_ENV: ":".join([*others, layer]), BUDGET_ENV: f"{float(budget):.9f}"}
