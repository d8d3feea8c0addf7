"""CPU utilisation and memory through psutil."""

from __future__ import annotations

import os

import psutil
from adaptyst_top.collectors.reading import DeviceReading


class CpuCollector:
    """Utilisation since the previous read (psutil keeps the last CPU times)."""

    def __init__(self) -> None:
        psutil.cpu_percent(percpu=True)  # prime: the first call has no previous sample
        self.name = _cpu_model()

    def read(self) -> DeviceReading:
        per_core = psutil.cpu_percent(percpu=True)
        mem = psutil.virtual_memory()
        load = os.getloadavg()
        return DeviceReading(
            id="cpu",
            kind="cpu",
            name=self.name,
            util=sum(per_core) / len(per_core) / 100.0 if per_core else None,
            mem_used_bytes=mem.total - mem.available,
            mem_total_bytes=mem.total,
            extra={"per_core": [p / 100.0 for p in per_core], "load": list(load)},
        )


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{psutil.cpu_count()} CPUs"
