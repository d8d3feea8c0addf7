"""One device's reading per interval, in the snapshot contract's shape."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from adaptyst_top.collectors.energy import EnergyReading

DeviceKind = Literal["cpu", "gpu", "fpga", "opencl"]


@dataclass
class DeviceReading:
    id: str
    kind: DeviceKind
    name: str
    util: float | None = None  # 0..1, None when unknown
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    energy_j: float | None = None  # since the collector started
    energy_source: str | None = None  # rapl | nvml | amdsmi | xrt | hwmon | estimate | None
    energy_method: str | None = None  # counter (hardware energy counter) | power (integrated)
    temp_c: float | None = None
    note: str = ""  # why a value is missing, or where an estimate comes from
    extra: dict[str, Any] = field(default_factory=dict)

    def set_energy(self, e: EnergyReading, measured_power_w: float | None = None) -> None:
        """Energy, its source and method; power as measured, else implied by the counter."""
        self.energy_j, self.energy_source, self.energy_method = e.energy_j, e.source, e.method
        self.power_w = measured_power_w if measured_power_w is not None else e.power_w

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
