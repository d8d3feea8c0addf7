"""Device readings and the node's device sources."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from adaptyst_top.snapshot.codec import JsonPart, json_field

DeviceKind = Literal["cpu", "gpu", "fpga", "opencl"]
EnergyMethod = Literal["counter", "power"]  # a hardware energy counter, or integrated power
# Where a device's energy comes from; "estimate" is the CPU power model's.
EnergySource = Literal["rapl", "nvml", "amdsmi", "xrt", "hwmon", "estimate"]
SourceStatus = Literal["ok", "missing", "denied", "degraded"]  # worst last


@dataclass
class EnergyReading:
    """What an energy account gives for one interval (collectors/energy/account.py)."""

    energy_j: float | None
    power_w: float | None
    source: EnergySource | None
    method: EnergyMethod | None = None  # how that source's energy was obtained in the last interval


@dataclass
class DeviceReading(JsonPart):
    """One device's reading. A collector fills it while it reads the device (hence not
    frozen); once in a snapshot it is never changed."""

    id: str
    kind: DeviceKind = field(metadata=json_field(missing="cpu"))
    name: str
    util: float | None = None  # 0..1, None when unknown
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    energy_j: float | None = None  # since the collector started
    energy_source: EnergySource | None = None
    energy_method: EnergyMethod | None = None
    temp_c: float | None = None
    note: str = ""  # why a value is missing, or where an estimate comes from
    extra: dict[str, Any] = field(default_factory=dict)  # source-specific figures

    def set_energy(self, e: EnergyReading, measured_power_w: float | None = None) -> None:
        """Energy, its source and method; power as measured, else implied by the counter."""
        self.energy_j, self.energy_source, self.energy_method = e.energy_j, e.source, e.method
        self.power_w = measured_power_w if measured_power_w is not None else e.power_w


@dataclass(frozen=True, slots=True)
class SourceState(JsonPart):
    """A device source of the node (rapl, nvml, ...) and why it is not there."""

    name: str
    state: SourceStatus
    reason: str = ""
