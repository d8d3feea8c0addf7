"""A task's runs on an accelerator, timed on the device's own clock: the device time its
kernels' rows (`cuda:`, `opencl:`) gained in an interval, where the application named
the task's kernels (`device_for(..., kernels=[globs])`). The task probe's time is the
host thread's, launches, waits and copies included; the kernels' is what the device
spent on them, which is what a move between devices changes.

Used only where it says one thing: the task ran in one (device, size, feature) bucket
on accelerators in the interval, and its kernels gained time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase

from adaptyst_top.snapshot import ProbeEntry

KERNEL_KINDS = ("cuda", "opencl")
HOST_DEVICES = ("cpu",)  # a task key's device part on the host: its own clock is right


class KernelClock:
    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], float] = {}  # (kind, kernel) -> its device ns

    def interval(self, probes: Iterable[ProbeEntry]) -> dict[str, float]:
        """Each kernel's device ns since the last call (a kernel two specs both show,
        once)."""
        now: dict[tuple[str, str], float] = {}
        for p in probes:
            if p.kind in KERNEL_KINDS and isinstance(p.key, str) and p.mean_ns is not None:
                row: tuple[str, str] = (str(p.kind), p.key)
                now[row] = max(now.get(row, 0.0), p.mean_ns * p.count)
        gained: dict[str, float] = {}
        for row, total in now.items():
            last = self._seen.get(row, 0.0)
            self._seen[row] = total
            if total > last:  # less: the row started over, its time is counted anew next
                gained[row[1]] = gained.get(row[1], 0.0) + total - last
        return gained


def device_ns(gained: Mapping[str, float], globs: Sequence[str]) -> float:
    """The device ns of the kernels GLOBS name."""
    return sum(ns for name, ns in gained.items() if any(fnmatchcase(name, g) for g in globs))


def on_accelerator(device: str) -> bool:
    return device.split(":")[0] not in HOST_DEVICES
