"""Each device's power and energy over the session, from the snapshots as they come:
what the `e` screen plots, kept without Textual and bounded however long the run."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from adaptyst_top.snapshot import DeviceReading

KEPT = 900  # readings per device: 15 minutes at the default 1 s interval


@dataclass(frozen=True)
class Reading:
    t: float  # the snapshot's time: seconds since the session started
    power_w: float | None
    energy_j: float | None


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) and v >= 0 else None


class PowerHistory:
    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self.devices: dict[str, deque[Reading]] = {}
        self.names: dict[str, str] = {}
        self.sources: dict[str, str] = {}

    def add(self, t: float, devices: Iterable[DeviceReading]) -> None:
        """A snapshot's devices: those with power or energy (an OpenCL view of a device
        already listed is that device, not another to add up). A time that goes back
        (a replay started over) starts the history over."""
        for d in devices:
            if d.kind == "opencl" and d.extra.get("maps_to"):
                continue
            power, energy = _finite(d.power_w), _finite(d.energy_j)
            if power is None and energy is None:
                continue
            kept = self.devices.setdefault(d.id, deque(maxlen=self.kept))
            if kept and t <= kept[-1].t:
                kept.clear()
            kept.append(Reading(t, power, energy))
            self.names[d.id] = d.name or d.id
            self.sources[d.id] = d.energy_source or ""

    def power(self, device: str) -> tuple[list[float], list[float]]:
        """(times, watts) of the readings that have a power."""
        points = [(r.t, r.power_w) for r in self.devices.get(device, ()) if r.power_w is not None]
        return [t for t, _ in points], [w for _, w in points]

    def energy(self, device: str) -> tuple[list[float], list[float]]:
        """(times, joules used since the first reading kept): a counter that went back
        (a device reset) adds nothing for that step rather than a negative."""
        out_t: list[float] = []
        out_j: list[float] = []
        total, last = 0.0, None
        for r in self.devices.get(device, ()):
            if r.energy_j is None:
                continue
            if last is not None and r.energy_j >= last:
                total += r.energy_j - last
            last = r.energy_j
            out_t.append(r.t)
            out_j.append(total)
        return out_t, out_j
