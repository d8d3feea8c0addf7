"""CPU utilisation, frequency, load and memory (psutil); energy from RAPL, or a
labelled estimate from a power model when configured, else none with the reason."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from adaptyst_top.collectors.devices.rapl import RaplReader, check_rapl
from adaptyst_top.collectors.devices.source import CollectorSource, SweepContext
from adaptyst_top.collectors.energy.account import EnergyAccount
from adaptyst_top.snapshot import DeviceReading, SourceState
from adaptyst_top.system.capability import Capability
from adaptyst_top.system.targets import process_cpu_ns

FREQ_EVERY_S = 10.0  # the clock frequency is read this often (see CpuCollector._freq_mhz)


@dataclass(frozen=True)
class PowerModel:
    """P = idle + (max - idle) * utilisation: an estimate, never a measurement."""

    idle_w: float
    max_w: float

    @classmethod
    def parse(cls, text: str) -> PowerModel:
        try:
            idle, peak = (float(x) for x in text.split(":"))
        except ValueError:
            raise ValueError(
                f"bad power model {text!r}: expected IDLE_W:MAX_W, e.g. 40:180"
            ) from None
        if not 0 <= idle <= peak < float("inf"):
            raise ValueError(f"bad power model {text!r}: need 0 <= IDLE_W <= MAX_W")
        return cls(idle, peak)

    def power(self, util: float) -> float:
        return self.idle_w + (self.max_w - self.idle_w) * util


class CpuCollector:
    """Utilisation since the previous read (psutil keeps the last CPU times)."""

    def __init__(
        self,
        pid: int | None = None,
        power_model: PowerModel | None = None,
        sysfs: Path = Path("/sys"),
    ) -> None:
        psutil.cpu_percent(percpu=True)  # prime: the first call has no previous sample
        self.name = _cpu_model()
        self.pid = pid
        self.rapl = RaplReader(sysfs)
        self.model = power_model
        self.estimate = EnergyAccount("estimate")
        self._freq: float | None = None
        self._freq_at: float | None = None

    def read(self, now: float | None = None) -> list[DeviceReading]:
        now = time.monotonic() if now is None else now
        per_core = psutil.cpu_percent(percpu=True)
        util = sum(per_core) / len(per_core) / 100.0 if per_core else None
        mem = psutil.virtual_memory()
        reading = DeviceReading(
            id="cpu",
            kind="cpu",
            name=self.name,
            util=util,
            mem_used_bytes=mem.total - mem.available,
            mem_total_bytes=mem.total,
            extra={
                "per_core": [p / 100.0 for p in per_core],
                "load": list(os.getloadavg()),
                "freq_mhz": self._freq_mhz(now),
            },
        )
        target = self._target_cpu_s()
        if target is not None:
            reading.extra["target_cpu_s"] = target
        energy = self.rapl.read(now)
        if energy is not None:
            reading.set_energy(energy)
        elif self.model is not None and util is not None:
            reading.set_energy(self.estimate.update(now, power_w=self.model.power(util)))
            reading.note = (
                f"estimate: {self.model.idle_w:g} W idle + util x "
                f"{self.model.max_w - self.model.idle_w:g} W ({self.rapl.reason or self.rapl.state})"
            )
        else:
            reading.note = f"energy unmeasured: {self.rapl.reason}"
            if self.rapl.state == "missing":
                reading.note += "; --cpu-power-model IDLE_W:MAX_W gives an estimate"
        return [reading]

    def _freq_mhz(self, now: float) -> float | None:
        # Where cpufreq has no sysfs (VMs), psutil parses /proc/cpuinfo, a line per core:
        # the costliest read of a sweep on a many-core node, for a figure a glance at
        # the screen does not need every second.
        if self._freq_at is None or now - self._freq_at >= FREQ_EVERY_S:
            self._freq, self._freq_at = _freq_mhz(), now
        return self._freq

    def _target_cpu_s(self) -> float | None:
        # The same figure the probe engine charges its overhead against.
        ns = None if self.pid is None else process_cpu_ns(self.pid)
        return None if ns is None else ns / 1e9


def _freq_mhz() -> float | None:
    try:
        f = psutil.cpu_freq()
    except (OSError, NotImplementedError):  # absent in many VMs
        return None
    return float(f.current) if f else None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{psutil.cpu_count()} CPUs"


def check_cpu() -> Capability:
    try:
        import psutil
    except ImportError:
        return Capability("cpu", "missing", "psutil not importable", "`make setup`")
    return Capability(
        "cpu",
        "ok",
        f"psutil {psutil.__version__}: {psutil.cpu_count()} logical CPUs, "
        f"{psutil.virtual_memory().total / 2**30:.1f} GiB",
    )


class CpuSource(CollectorSource):
    """The host's CPUs: utilisation by psutil, energy by RAPL (or the power model)."""

    name = "rapl"
    energy = ("rapl", "estimate")
    checks = (("cpu", check_cpu), ("rapl", check_rapl))

    collector: CpuCollector

    @classmethod
    def build(cls, ctx: SweepContext) -> CpuSource:
        model = ctx.power_model if isinstance(ctx.power_model, PowerModel) else None
        return cls(CpuCollector(ctx.pid, model, ctx.sysfs))

    def state(self) -> SourceState:
        rapl = self.collector.rapl
        return SourceState("rapl", rapl.state, rapl.reason)
