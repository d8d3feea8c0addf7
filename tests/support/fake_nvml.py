"""A stand-in for the slice of pynvml the collectors call: pynvml's own error classes,
return codes, structures and units (mW, mJ, bytes, MHz, °C)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml


@dataclass
class FakeGpu:
    name: str = "NVIDIA H200"
    uuid: str = "GPU-5d3c0ad8-0000-0000-0000-000000000000"
    bus_id: str = "00000000:17:00.0"
    util: int = 50  # %
    mem_util: int = 20
    mem_used: int = 10 << 30  # NVML v2's used: the driver's reservation apart
    mem_reserved: int = 0  # v1 counts it as used (an idle H200: 644939776 bytes)
    mem_total: int = 141 << 30
    power_mw: int = 300_000
    instant_mw: int | None = 310_000  # None: field not supported
    energy_mj: int | None = 1_000_000  # None: before Volta
    temp: int = 45
    sm_clock: int = 1980
    procs: list[tuple[int, int]] = field(default_factory=list)  # (pid, bytes)
    proc_util: list[tuple[int, int, int]] = field(default_factory=list)  # (pid, sm %, ts)
    mig: bool = False
    lost: bool = False
    errors: dict[str, int] = field(default_factory=dict)  # call name -> NVML_ERROR_*


class FakeNvml:
    NVMLError = pynvml.NVMLError
    NVMLError_NotSupported = pynvml.NVMLError_NotSupported
    NVMLError_NoPermission = pynvml.NVMLError_NoPermission
    NVMLError_GpuIsLost = pynvml.NVMLError_GpuIsLost
    NVMLError_NotFound = pynvml.NVMLError_NotFound
    NVMLError_FunctionNotFound = pynvml.NVMLError_FunctionNotFound
    NVMLError_ArgumentVersionMismatch = pynvml.NVMLError_ArgumentVersionMismatch
    nvmlMemory_v2 = pynvml.nvmlMemory_v2
    NVMLError_LibraryNotFound = pynvml.NVMLError_LibraryNotFound
    NVML_ERROR_LIBRARY_NOT_FOUND = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    NVML_ERROR_DRIVER_NOT_LOADED = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    NVML_ERROR_NO_PERMISSION = pynvml.NVML_ERROR_NO_PERMISSION
    NVML_ERROR_GPU_IS_LOST = pynvml.NVML_ERROR_GPU_IS_LOST
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_FI_DEV_POWER_INSTANT = pynvml.NVML_FI_DEV_POWER_INSTANT
    NVML_SUCCESS = pynvml.NVML_SUCCESS
    NVML_DEVICE_MIG_ENABLE = pynvml.NVML_DEVICE_MIG_ENABLE

    def __init__(self, gpus: list[FakeGpu] | None = None, init_error: int | None = None) -> None:
        self.gpus = gpus if gpus is not None else [FakeGpu()]
        self.init_error = init_error
        self.calls: dict[str, int] = {}
        self.shutdowns = 0

    def _call(self, name: str, h: int) -> FakeGpu:
        self.calls[name] = self.calls.get(name, 0) + 1
        g = self.gpus[h]
        if g.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        if name in g.errors:
            raise pynvml.NVMLError(g.errors[name])
        return g

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.95.05"

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> str:
        return self.gpus[h].name

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self.gpus[h].uuid

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        return SimpleNamespace(busId=self.gpus[h].bus_id)

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        g = self._call("nvmlDeviceGetUtilizationRates", h)
        return SimpleNamespace(gpu=g.util, memory=g.mem_util)

    def nvmlDeviceGetMemoryInfo(self, h: int, version: int | None = None) -> Any:
        g = self._call(
            "nvmlDeviceGetMemoryInfo" if version is None else "nvmlDeviceGetMemoryInfo_v2", h
        )
        free = max(0, g.mem_total - g.mem_used - g.mem_reserved)
        if version is None:
            return SimpleNamespace(used=g.mem_used + g.mem_reserved, total=g.mem_total, free=free)
        return SimpleNamespace(
            version=version, used=g.mem_used, reserved=g.mem_reserved, total=g.mem_total, free=free
        )

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return self._call("nvmlDeviceGetPowerUsage", h).power_mw

    def nvmlDeviceGetFieldValues(self, h: int, ids: list[int]) -> Any:
        g = self._call("nvmlDeviceGetFieldValues", h)
        values = (pynvml.c_nvmlFieldValue_t * len(ids))()
        for i, fid in enumerate(ids):
            values[i].fieldId = fid
            if fid == pynvml.NVML_FI_DEV_POWER_INSTANT and g.instant_mw is not None:
                values[i].nvmlReturn = pynvml.NVML_SUCCESS
                values[i].value.uiVal = g.instant_mw
            else:
                values[i].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return values

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        g = self._call("nvmlDeviceGetTotalEnergyConsumption", h)
        if g.energy_mj is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return g.energy_mj

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return self._call("nvmlDeviceGetTemperature", h).temp

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        return self._call("nvmlDeviceGetClockInfo", h).sm_clock

    def nvmlDeviceGetMigMode(self, h: int) -> tuple[int, int]:
        g = self._call("nvmlDeviceGetMigMode", h)
        return (1, 1) if g.mig else (0, 0)

    def nvmlDeviceGetMaxMigDeviceCount(self, h: int) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: int, i: int) -> int:
        if i >= 2:  # two instances configured, the other slots empty
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return 1000 + i

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        g = self._call("nvmlDeviceGetComputeRunningProcesses", h)
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in g.procs]

    def nvmlDeviceGetProcessUtilization(self, h: int, last: int) -> list[Any]:
        g = self._call("nvmlDeviceGetProcessUtilization", h)
        samples = [
            SimpleNamespace(pid=p, smUtil=u, timeStamp=t) for p, u, t in g.proc_util if t > last
        ]
        if not samples:  # as an H200 answers with no sample newer than `last`
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return samples


def mig_aware(fake: FakeNvml) -> FakeNvml:
    """MIG instance handles (>= 1000) answer UUID and memory like a GPU does."""
    uuid, mem = fake.nvmlDeviceGetUUID, fake.nvmlDeviceGetMemoryInfo

    def uuid_of(h: int) -> str:
        return f"MIG-{h}" if h >= 1000 else uuid(h)

    def mem_of(h: int, version: int | None = None) -> Any:
        if h >= 1000:
            return SimpleNamespace(used=1 << 30, total=18 << 30, reserved=0)
        return mem(h, version)

    fake.nvmlDeviceGetUUID = uuid_of  # type: ignore[method-assign]
    fake.nvmlDeviceGetMemoryInfo = mem_of  # type: ignore[method-assign]
    return fake
