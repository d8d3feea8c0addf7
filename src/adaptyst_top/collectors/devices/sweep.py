"""All device collectors behind one sweep, each at its own rate, with the reason
for every source that is not there."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

from adaptyst_top.collectors.devices.amd_gpu import AmdGpuCollector
from adaptyst_top.collectors.devices.cpu import CpuCollector, PowerModel
from adaptyst_top.collectors.devices.fpga import FpgaCollector
from adaptyst_top.collectors.devices.nvml import NvmlCollector
from adaptyst_top.collectors.devices.opencl import OpenCLCollector
from adaptyst_top.snapshot import DeviceReading, SourceState

DEVICE_PERIOD_S = 1.0  # energy and utilisation: once a second is what the sensors give


class Collector(Protocol):
    def read(self, now: float | None = None) -> list[DeviceReading]: ...


class DeviceSweep:
    def __init__(
        self,
        pid: int | None = None,
        power_model: PowerModel | None = None,
        sysfs: Path = Path("/sys"),
        nvml: Any | None = None,
        opencl: OpenCLCollector | None = None,
        period_s: float = DEVICE_PERIOD_S,
    ) -> None:
        self.cpu = CpuCollector(pid, power_model, sysfs)
        self.nvml = NvmlCollector(nvml)
        self.amd = AmdGpuCollector(sysfs)
        self.fpga = FpgaCollector(sysfs)
        self.opencl = opencl if opencl is not None else OpenCLCollector()
        self.period_s = period_s
        self._last: list[DeviceReading] = []
        self._last_t: float | None = None

    def read(self, now: float | None = None) -> list[DeviceReading]:
        now = time.monotonic() if now is None else now
        if self._last_t is not None and now - self._last_t < self.period_s * 0.9:
            return self._last  # a faster refresh re-shows the last sweep
        physical: list[DeviceReading] = []
        for c in (self.cpu, self.nvml, self.amd, self.fpga):
            physical.extend(c.read(now))
        self._last = physical + self.opencl.read(physical)
        self._last_t = now
        return self._last

    def sources(self) -> list[SourceState]:
        rapl = self.cpu.rapl
        return [
            SourceState("rapl", rapl.state, rapl.reason),
            SourceState(
                "nvml",
                self.nvml.state if self.nvml.gpus or self.nvml.state != "ok" else "missing",
                self.nvml.reason or ("" if self.nvml.gpus else "no NVIDIA GPU"),
            ),
            SourceState(
                "amd-gpu",
                "ok" if self.amd.cards else "missing",
                "" if self.amd.cards else "no AMD GPU",
            ),
            SourceState(
                "fpga",
                "ok" if self.fpga.cards else "missing",
                "" if self.fpga.cards else "no FPGA card (XRT or DFL)",
            ),
            SourceState("opencl", "ok" if self.opencl.devices else "missing", self.opencl.reason),
        ]

    def close(self) -> None:
        self.nvml.close()
