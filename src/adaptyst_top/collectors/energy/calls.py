"""A placed Dask call's joules on its worker, by the monitor's own rule (probes.py): the CPU's energy (RAPL where readable, else the power model the
DevicePlacement states, `estimate`) is split over the node's busy CPU time, so a call is
charged its CPU time at the node's joules per busy CPU-second, measured over windows of
at least WINDOW_S. A call on a GPU adds the GPU's energy counter over the call (the worker
runs one placed call at a time on it: Dask's resource accounting).

The first calls on a worker, before a window is complete, have no energy (None): the
advisor judges them on time, as it does for a device that measures none."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from adaptyst_top.collectors.devices.cpu import PowerModel
from adaptyst_top.collectors.devices.rapl import RaplReader
from adaptyst_top.collectors.energy.account import EnergyAccount
from adaptyst_top.collectors.energy.busy import system_busy_ns
from adaptyst_top.collectors.energy.probes import MIN_SPLIT_NS

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
        rapl: RaplReader | None = None,
        busy_ns: Callable[[], int] = system_busy_ns,
        gpu_counter_j: Callable[[], float | None] | None = None,
    ) -> None:
        self.model = power_model
        self.rapl = rapl if rapl is not None else RaplReader()
        self.busy_ns = busy_ns
        self.gpu_counter_j = gpu_counter_j
        self.ncpu = os.cpu_count() or 1
        self.j_per_cpu_s: float | None = None  # the last window's rate
        self._lock = threading.Lock()  # a worker runs calls on several threads
        self.source: str | None = None
        self._window: tuple[float, int] | None = None  # its start: (energy J, busy ns)
        self._estimate = EnergyAccount("estimate")  # the power model, integrated
        self._last: tuple[float, int] | None = None  # (t, busy ns) of the last sample
        self._sampled_at = time.monotonic()
        self._sample(self._sampled_at)

    def _cpu_energy(self, now: float, busy: int) -> tuple[float, str] | None:
        """The CPU's energy so far: RAPL's where readable, else the power model's at the
        node's utilisation from its busy time (psutil's figure is per thread)."""
        reading = self.rapl.read(now)
        if reading is not None and reading.energy_j is not None:
            return reading.energy_j, "rapl"
        if self.model is None:
            return None
        util = 0.0
        if self._last is not None and now > self._last[0]:
            util = (busy - self._last[1]) / 1e9 / ((now - self._last[0]) * self.ncpu)
        e = self._estimate.update(now, power_w=self.model.power(min(1.0, max(0.0, util))))
        return None if e.energy_j is None else (e.energy_j, "estimate")

    def _sample(self, now: float) -> None:
        self._sampled_at = now
        busy = self.busy_ns()
        energy = self._cpu_energy(now, busy)
        self._last = (now, busy)
        if energy is None:
            self._window = None
            return
        if self._window is not None:
            e0, b0 = self._window
            if busy - b0 < MIN_SPLIT_NS:
                return  # too little busy time to split: the window goes on
            self.j_per_cpu_s = max(0.0, energy[0] - e0) / ((busy - b0) / 1e9)
            self.source = energy[1]
        self._window = (energy[0], busy)

    @contextmanager
    def call(self, kind: str) -> Iterator[Measured]:
        """Measure the call run inside: its CPU time (the thread's; an OpenCL call's, the
        process's, as the CPU device's runtime runs it on threads of its own: other
        calls running beside it in the worker are counted too). A measurement that
        fails leaves the call without energy, never fails the call."""
        clock = time.process_time_ns if kind == "opencl" else time.thread_time_ns
        out = Measured()
        gpu0 = self._gpu() if kind == "cuda" else None
        c0 = clock()
        yield out
        try:
            self._charge(out, (clock() - c0) / 1e9, gpu0)
        except Exception:  # a sensor that broke mid-run (psutil, NVML): no energy
            out.energy_j = out.method = None

    def _gpu(self) -> float | None:
        try:
            return self.gpu_counter_j() if self.gpu_counter_j else None
        except Exception:
            return None

    def _charge(self, out: Measured, cpu_s: float, gpu0: float | None) -> None:
        now = time.monotonic()
        with self._lock:  # one sampler at a time; the others use the rate there is
            if now - self._sampled_at >= WINDOW_S:
                self._sample(now)
            rate, source = self.j_per_cpu_s, self.source
        joules, methods = 0.0, []
        if rate is not None:
            joules += cpu_s * rate
            methods.append(f"{source}-oncpu")
        if gpu0 is not None:
            gpu1 = self._gpu()
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
