"""What a worker offers: the device kinds it declared as Dask resources
(`dask worker --resources "cuda=1"`), or, when it declared none, the ones found on its
node (an OpenCL device through pyopencl, the platform rule the monitor uses; a CUDA
device through cupy), declared for it, one of each, so that Dask's own resource
accounting runs one placed call at a time on a device. It also measures each placed
call's energy there (collectors/energy/calls.py), by the power model the DevicePlacement states where
the node has no RAPL."""

from __future__ import annotations

import asyncio
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from adaptyst_top.collectors.devices.cpu import PowerModel
from adaptyst_top.collectors.devices.opencl_platforms import platforms_in_use
from adaptyst_top.collectors.energy.calls import RunEnergy, nvml_counter

OFFER_NAME = "adaptyst-device-offer"


def detect_kinds() -> list[str]:
    """The accelerator kinds this node has (never raises: a broken driver is none)."""
    found = []
    try:
        import pyopencl as cl

        if any(p.get_devices() for p in platforms_in_use(cl.get_platforms())):
            found.append("opencl")
    except Exception:  # no ICD loader, no platform, a driver error: no OpenCL here
        pass
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            found.append("cuda")
    except Exception:  # no cupy, no driver, no device
        pass
    return found


class DeviceOffer(WorkerPlugin):
    name = OFFER_NAME

    def __init__(self, cpu_power_model: str | None = None) -> None:
        self.cpu_power_model = cpu_power_model  # checked by DevicePlacement
        self.energy: RunEnergy | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"cpu_power_model": self.cpu_power_model, "energy": None}

    async def setup(self, worker: Any) -> None:
        model = PowerModel.parse(self.cpu_power_model) if self.cpu_power_model else None
        declared = dict(worker.state.total_resources)
        kinds = [] if declared else await asyncio.to_thread(detect_kinds)
        if kinds:
            await worker.set_resources(**dict.fromkeys(kinds, 1))
        gpu = nvml_counter if "cuda" in (kinds or declared) else lambda: None
        self.energy = await asyncio.to_thread(lambda: RunEnergy(model, gpu_counter_j=gpu()))
