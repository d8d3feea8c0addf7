"""Device readings and the node's device sources."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from adaptyst_top.snapshot.reading import Fields, inert_values

DeviceKind = Literal["cpu", "gpu", "fpga", "opencl"]
EnergyMethod = Literal["counter", "power"]  # a hardware energy counter, or integrated power


@dataclass
class EnergyReading:
    """What an energy account gives for one interval (collectors/devices/energy.py)."""

    energy_j: float | None
    power_w: float | None
    source: str | None  # the snapshot contract's names: rapl, nvml, amdsmi, xrt, hwmon, estimate
    method: EnergyMethod | None = None  # how that source's energy was obtained in the last interval


@dataclass
class DeviceReading:
    """One device's reading. A collector fills it while it reads the device (hence not
    frozen); once in a snapshot it is never changed."""

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
    extra: dict[str, Any] = field(default_factory=dict)  # source-specific figures

    def set_energy(self, e: EnergyReading, measured_power_w: float | None = None) -> None:
        """Energy, its source and method; power as measured, else implied by the counter."""
        self.energy_j, self.energy_source, self.energy_method = e.energy_j, e.source, e.method
        self.power_w = measured_power_w if measured_power_w is not None else e.power_w

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "name": self.name,
            "util": self.util,
            "mem_used_bytes": self.mem_used_bytes,
            "mem_total_bytes": self.mem_total_bytes,
            "power_w": self.power_w,
            "energy_j": self.energy_j,
            "energy_source": self.energy_source,
            "energy_method": self.energy_method,
            "temp_c": self.temp_c,
            "note": self.note,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_json(cls, value: Any) -> DeviceReading:
        d = Fields(value, "device")
        extra = d.value("extra")
        return cls(
            id=d.text("id"),
            kind=d.text("kind", "cpu"),  # type: ignore[arg-type]  # carried as recorded
            name=d.text("name"),
            util=d.number("util"),
            mem_used_bytes=d.integer("mem_used_bytes"),
            mem_total_bytes=d.integer("mem_total_bytes"),
            power_w=d.number("power_w"),
            energy_j=d.number("energy_j"),
            energy_source=d.opt_text("energy_source"),
            energy_method=d.opt_text("energy_method"),
            temp_c=d.number("temp_c"),
            note=d.text("note"),
            extra=inert_values(extra) if isinstance(extra, dict) else {},
        )


@dataclass(frozen=True, slots=True)
class SourceState:
    """A device source of the node (rapl, nvml, ...) and why it is not there."""

    name: str
    state: str  # ok | missing | denied | degraded
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "reason": self.reason}

    @classmethod
    def from_json(cls, value: Any) -> SourceState:
        d = Fields(value, "device source")
        return cls(d.text("name"), d.text("state"), d.text("reason"))
