"""A placed task's run, in joules: its mean time at the power of the device it ran on
(an OpenCL device's, its physical device's). The placement loop learns from it and the
agent's exporter publishes it; both ask here, reading only the snapshot's devices."""

from __future__ import annotations

import math
from collections.abc import Sequence

from adaptyst_top.snapshot import DeviceReading


def device_power(device: str, devices: Sequence[DeviceReading]) -> float | None:
    """The power of the device a task ran on (an OpenCL device's: its physical device's)."""
    by_id = {d.id: d for d in devices}
    d = by_id.get(device)
    if d is not None and d.kind == "opencl":
        d = by_id.get(d.extra.get("maps_to", "")) or d
    return None if d is None else d.power_w


def run_joules(device: str, devices: Sequence[DeviceReading], seconds: float) -> float | None:
    """One run of SECONDS on DEVICE, at the device's power now (None: no power known)."""
    power = device_power(device, devices)
    if power is None or not math.isfinite(power * seconds):
        return None
    return power * seconds
