"""A placed call's joules on its worker, by the monitor's own rule (collectors/
probe_energy.py): the CPU's energy (RAPL where readable, else the power model the
DevicePlacement states, `estimate`) is split over the node's busy CPU time, so a call is
charged its CPU time at the node's joules per busy CPU-second, measured over windows of
at least WINDOW_S. A call on a GPU adds the GPU's energy counter over the call (the worker
runs one placed call at a time on it: Dask's resource accounting).

The first calls on a worker, before a window is complete, have no energy (None): the
advisor judges them on time, as it does for a device that measures none."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from adaptyst_top.collectors.devices.cpu import CpuCollector, PowerModel
from adaptyst_top.collectors.probe_energy import MIN_SPLIT_NS
from adaptyst_top.collectors.probes.overhead import system_busy_ns

WINDOW_S = 1.0


@dataclass
class Measured:
    """What a call cost: its joules (None: not measured yet) and how they were found."""

    energy_j: float | None = None
    method: str | None = None


class RunEnergy:
    def __init__(
        self,
        power_model: PowerModel | None = None,
        cpu: CpuCollector | None = None,
        busy_ns: Callable[[], int] = system_busy_ns,
        gpu_counter_j: Callable[[], float | None] | None = None,
    ) -> None:
        self.cpu = cpu if cpu is not None else CpuCollector(power_model=power_model)
        self.busy_ns = busy_ns
        self.gpu_counter_j = gpu_counter_j
        self.j_per_cpu_s: float | None = None  # the last window's rate
        self.source: str | None = None
        self._window: tuple[float, int] | None = None  # its start: (energy J, busy ns)
        self._sampled_at = time.monotonic()
        self._sample(self._sampled_at)

    def _sample(self, now: float) -> None:
        self._sampled_at = now
        reading = self.cpu.read(now)[0]
        busy = self.busy_ns()
        if reading.energy_j is None:
            self._window = None
            return
        if self._window is not None:
            e0, b0 = self._window
            if busy - b0 < MIN_SPLIT_NS:
                return  # too little busy time to split: the window goes on
            self.j_per_cpu_s = max(0.0, reading.energy_j - e0) / ((busy - b0) / 1e9)
            self.source = reading.energy_source
        self._window = (reading.energy_j, busy)

    @contextmanager
    def call(self, kind: str) -> Iterator[Measured]:
        """Measure the call run inside: its CPU time (the thread's; an OpenCL call's, the
        process's, as the CPU device's runtime runs it on threads of its own)."""
        clock = time.thread_time_ns if kind == "cpu" else time.process_time_ns
        out = Measured()
        gpu0 = self.gpu_counter_j() if kind == "cuda" and self.gpu_counter_j else None
        c0 = clock()
        yield out
        cpu_s = (clock() - c0) / 1e9
        now = time.monotonic()
        if now - self._sampled_at >= WINDOW_S:
            self._sample(now)
        joules, methods = 0.0, []
        if self.j_per_cpu_s is not None:
            joules += cpu_s * self.j_per_cpu_s
            methods.append(f"{self.source}-oncpu")
        if gpu0 is not None and self.gpu_counter_j is not None:
            gpu1 = self.gpu_counter_j()
            if gpu1 is not None and gpu1 >= gpu0:
                joules += gpu1 - gpu0
                methods.append("nvml-counter")
        if methods and math.isfinite(joules):
            out.energy_j, out.method = joules, "+".join(methods)


def nvml_counter() -> Callable[[], float | None] | None:
    """The energy counter (J) of the GPU this process's cupy uses, through NVML; None
    where there is none. Never ran on a real GPU here (see the stop notes)."""
    try:
        import cupy
        import pynvml

        pynvml.nvmlInit()
        bus = cupy.cuda.Device().pci_bus_id
        handle: Any = pynvml.nvmlDeviceGetHandleByPciBusId(bus)
    except Exception:  # no cupy, no NVML, no device: no GPU counter
        return None

    def read() -> float | None:
        try:
            return float(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)) / 1000.0
        except pynvml.NVMLError:
            return None

    return read
