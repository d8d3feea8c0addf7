"""cuda:KERNEL: the device's own time of each CUDA kernel launch whose name (as CUPTI
gives it: mangled) matches the glob KERNEL, and of copies and memsets (named [HtoD],
[DtoH], [DtoD], [copy], [memset]), for a command the monitor launches.

The command runs with the tool's injection library (cuda_inject.c, through
CUDA_INJECTION64_PATH, which the driver loads at cuInit): CUPTI's activity records of
kernels, copies and memsets are read a buffer at a time on CUPTI's thread, counted by
name (adaptyst_cuda:launches) and, as many as the budget allows, handed over timed 64
at a time (adaptyst_cuda:timed); device_layer says how a row is made of them. Records
CUPTI dropped are counted as [dropped]. Names: device_layer.row_name."""

from __future__ import annotations

from types import MappingProxyType

from adaptyst_top.collectors.probes.cost.class_cost import ClassCost
from adaptyst_top.collectors.probes.kinds.base import PlanContext
from adaptyst_top.collectors.probes.kinds.device_layer import DeviceLayerKind, library_path
from adaptyst_top.collectors.probes.model import ProbeError
from adaptyst_top.collectors.probes.spec import ProbeSpec

INJECT_MODULE = "adaptyst_top.collectors.probes.kinds._cuda_inject"
PROVIDER = "adaptyst_cuda"
INJECTION_ENV = "CUDA_INJECTION64_PATH"  # the driver reads one library's path
BUDGET_ENV = "ADAPTYST_CUDA_BUDGET"  # the share of the time for filing timed records


def inject_path() -> str | None:
    """The injection library as installed (built with the package), or None."""
    return library_path(INJECT_MODULE)


class Cuda(DeviceLayerKind):
    name = "cuda"
    shape = "cuda:KERNEL"
    syntax = "cuda:KERNEL"
    what = "device time of CUDA kernels (CUPTI), for a launched command"
    module = INJECT_MODULE
    provider = PROVIDER
    # A kernel's CUPTI record read by the injection library on CUPTI's thread, handed
    # over timed (its share of a batch's probe hit) or only counted: bench_cuda_records,
    # on CUPTI's fake (what CUPTI itself adds to a launch is the driver's).
    timed_class = "cuda-record"
    counted_class = "cuda-count"
    cost_classes = MappingProxyType(
        {
            timed_class: ClassCost(300.0, 0.0, "default"),
            counted_class: ClassCost(84.0, 0.0, "default"),
        }
    )
    device = "CUDA device"
    exclusive_env = (INJECTION_ENV,)
    noun = "CUDA injection library"
    missing = (
        "this install has no CUDA injection library (built when CUPTI's headers are "
        "there: pip's nvidia-cuda-cupti-cu12, or CUDA_HOME; then install again)"
    )

    def instead(self, ctx: PlanContext, spec: ProbeSpec) -> tuple[ProbeSpec, str] | None:
        """A process started without the library (--pid): CUPTI cannot be put under a
        running program, so the spec ends in one line."""
        if ctx.pid is not None:
            why = self.not_loaded_in(ctx, ctx.pid, spec.target, INJECTION_ENV)
            if why is not None:
                raise ProbeError(f"{spec.text}: {why}")
        return None

    def launch_env(
        self, env: dict[str, str], budget: float, spec: ProbeSpec | None = None
    ) -> dict[str, str]:
        library = inject_path()
        if library is None:
            return {}
        # The driver loads one injection library: ours, in place of any other's (said).
        return {INJECTION_ENV: library, BUDGET_ENV: f"{float(budget):.9f}"}
