"""A device source: what the sweep reads, `doctor` checks and the help names.

A new source (an Intel GPU through sysfs, Grace, Gaudi...) is one module holding its
collector and a DeviceSource subclass, and one line in sources.py's SOURCES
(docs/extending.md). Everything else is built from that tuple: the sweep loops over it,
`doctor` runs each source's checks, and the help names the sources and their energy.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from adaptyst_top.snapshot import DeviceReading, EnergySource, SourceState
from adaptyst_top.system.capability import Capability


@dataclass(frozen=True)
class SweepContext:
    """What a source is built from: the process watched, the CPU's power model, the
    roots and modules a test stands in for hardware with."""

    pid: int | None = None
    power_model: object | None = None  # cpu.PowerModel (its module builds on this one)
    sysfs: Path = Path("/sys")
    nvml: Any | None = None  # an NVML module (pynvml's names); None: the installed one
    opencl: Any | None = None  # an OpenCLCollector already made; None: a new one


class DeviceSource(ABC):
    """One kind of device source, its collector inside."""

    name: ClassVar[str]  # as the sweep's SourceState and `doctor` call it
    energy: ClassVar[tuple[EnergySource, ...]] = ()  # the energy sources it can report
    # `doctor`'s checks of it: (capability, check); each check's arguments defaulted.
    checks: ClassVar[tuple[tuple[str, Callable[[], Capability]], ...]] = ()

    @classmethod
    @abstractmethod
    def build(cls, ctx: SweepContext) -> DeviceSource: ...

    @abstractmethod
    def read(self, now: float, found: Sequence[DeviceReading]) -> list[DeviceReading]:
        """Its devices now; FOUND: what the sources before it read in this sweep."""

    @abstractmethod
    def state(self) -> SourceState: ...

    def close(self) -> None:
        """What it holds (a library's session) let go; most hold nothing."""
        return None


class CollectorSource(DeviceSource):
    """A source around a collector that reads by the clock alone (most of them)."""

    def __init__(self, collector: Any) -> None:
        self.collector = collector

    def read(self, now: float, found: Sequence[DeviceReading]) -> list[DeviceReading]:
        readings: list[DeviceReading] = self.collector.read(now)
        return readings
