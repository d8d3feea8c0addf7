"""All device collectors behind one sweep, each at its own rate, with the reason
for every source that is not there."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from adaptyst_top.collectors.devices import sources as registry
from adaptyst_top.collectors.devices.cpu import PowerModel
from adaptyst_top.collectors.devices.opencl import OpenCLCollector
from adaptyst_top.collectors.devices.source import DeviceSource, SweepContext
from adaptyst_top.snapshot import DeviceReading, SourceState

DEVICE_PERIOD_S = 1.0  # energy and utilisation: once a second is what the sensors give


class DeviceSweep:
    def __init__(
        self,
        pid: int | None = None,
        power_model: PowerModel | None = None,
        sysfs: Path = Path("/sys"),
        nvml: Any | None = None,
        opencl: OpenCLCollector | None = None,
        period_s: float = DEVICE_PERIOD_S,
        sources: tuple[type[DeviceSource], ...] | None = None,
    ) -> None:
        """SOURCES: the kinds of source read (None: every one, registry.SOURCES)."""
        ctx = SweepContext(pid, power_model, sysfs, nvml, opencl)
        kinds = registry.SOURCES if sources is None else sources
        self.devices: list[DeviceSource] = [s.build(ctx) for s in kinds]
        self.period_s = period_s
        self._last: list[DeviceReading] = []
        self._last_t: float | None = None

    def source(self, name: str) -> DeviceSource | None:
        return next((s for s in self.devices if s.name == name), None)

    @property
    def opencl(self) -> OpenCLCollector:
        """The OpenCL devices' collector (what a caller lists them by)."""
        source = self.source("opencl")
        collector = getattr(source, "collector", None)
        assert isinstance(collector, OpenCLCollector)
        return collector

    def read(self, now: float | None = None) -> list[DeviceReading]:
        now = time.monotonic() if now is None else now
        if self._last_t is not None and now - self._last_t < self.period_s * 0.9:
            return self._last  # a faster refresh re-shows the last sweep
        found: list[DeviceReading] = []
        for source in self.devices:
            found.extend(source.read(now, found))
        self._last = found
        self._last_t = now
        return self._last

    def sources(self) -> list[SourceState]:
        return [s.state() for s in self.devices]

    def close(self) -> None:
        for s in self.devices:
            s.close()
