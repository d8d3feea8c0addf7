"""GPU joules for the rows of work on a GPU: the GPU energy NVML's per-process
utilisation gave the session's processes (collectors/energy/gpu_split.py), split over

- their CUDA kernel rows (`cuda:`) first, by each kernel's device time (its timed
  launches' mean, times all its launches), as much of the joules as the kernels' time
  covers of the process's busy time (its SM utilisation over the window). Only where
  one process of the session had GPU joules in the window: the rows do not say which
  process a kernel ran in, and one's kernels must not take another's joules;
- then what is left over their GPU task rows (the task API's USDT pairs keyed
  `task|cuda:0|...`), by each row's time in the interval. A task's run on a GPU is its
  host thread waiting while the device works, so its on-CPU time says little of it; its
  time does. A joule goes to one row: a task's kernels' joules are the kernels'.

Joules wait for rows with time, and time for the next per-process reading, as on the
CPU (collectors/energy/probes.py). The GPU's whole energy over the same intervals is `measured`: the
rest (other processes, idle draw, this session's work outside probed tasks) is shown
apart, never charged to a row."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from adaptyst_top.collectors.energy.gpu_split import METHOD, METHODS
from adaptyst_top.snapshot import DeviceReading, EnergySplit, ProbeEntry
from adaptyst_top.snapshot.task_key import task_device

GPU_TASK_DEVICES = ("cuda", "hip", "gpu")  # a task key's device part, before any ":N"


def gpu_kernel(e: ProbeEntry) -> bool:
    """A CUDA kernel's row with device time measured (not a copy's or a memset's,
    `[HtoD]` and the like: the copy engines' time, not the SMs')."""
    return e.kind == "cuda" and e.latency.mean_ns is not None and not e.name.startswith("[")


def gpu_task(e: ProbeEntry) -> bool:
    """A task row (its key `task|device|size|feature`) of work on a GPU."""
    return e.kind == "usdt" and task_device(e.key) in GPU_TASK_DEVICES


class GpuTaskEnergy:
    def __init__(self, holds: Callable[[int], bool]) -> None:
        """HOLDS(pid): whether a process is the session's."""
        self.holds = holds
        self.joules: dict[str, float] = {}  # row ref -> GPU joules so far
        self._wall_seen: dict[str, float] = {}
        self._pending: dict[str, float] = {}  # row ref -> wall ns not charged yet
        self._kernels: dict[str, float] = {}  # kernel row ref -> device ns not charged yet
        self._busy = 0.0  # the held processes' SM utilisation in the window, summed
        self._spent: set[int] = set()  # the held processes with GPU joules in the window
        self._proc_seen: dict[tuple[str, int], float] = {}  # (device, pid) -> its joules
        self._device_seen: dict[str, float] = {}
        self._pending_j = 0.0
        self._fresh_at: float | None = None  # when the processes' joules last came in
        self.measured_j = 0.0
        self.attributed_j = 0.0
        self.method = METHOD

    def update(
        self,
        entries: Sequence[ProbeEntry],
        refs: Sequence[str],
        devices: Sequence[DeviceReading],
        now: float | None = None,
    ) -> None:
        now = time.monotonic() if now is None else now
        if self._fresh_at is None:
            self._fresh_at = now  # the first window starts with the session
        for e, ref in zip(entries, refs, strict=True):
            pending = self._kernels if gpu_kernel(e) else self._pending if gpu_task(e) else None
            if pending is None or e.latency.mean_ns is None:
                continue
            wall = e.latency.mean_ns * e.count
            seen = self._wall_seen.get(ref, 0.0)
            if wall > seen:
                pending[ref] = pending.get(ref, 0.0) + wall - seen
                self._wall_seen[ref] = wall
        fresh = False
        for d in devices:
            if d.kind != "gpu" or d.energy_j is None:
                continue
            last = self._device_seen.get(d.id)
            self._device_seen[d.id] = d.energy_j
            method = d.extra.get("process_energy")
            if method not in METHODS:
                continue  # no split yet (the first process read), or none here (MIG)
            self.method = str(method)
            for p in d.extra.get("processes") or ():
                pid, joules = p.get("pid"), p.get("energy_j")
                if not isinstance(pid, int) or not isinstance(joules, (int, float)):
                    continue
                # A process new since the device's last reading: all its joules are since.
                before = self._proc_seen.get((d.id, pid), None if last is None else 0.0)
                self._proc_seen[(d.id, pid)] = joules
                if before is not None and joules > before and self.holds(pid):
                    self._pending_j += joules - before
                    util = p.get("sm_util")
                    self._busy += (
                        min(1.0, max(0.0, util)) if isinstance(util, (int, float)) else 1.0
                    )
                    self._spent.add(pid)
                    fresh = True
            if last is not None and d.energy_j > last and (self._pending or self._kernels):
                self.measured_j += d.energy_j - last
        if fresh:
            window, self._fresh_at = now - (self._fresh_at or now), now
            if window > 0:
                left = self._pending_j
                if len(self._spent) == 1:
                    left = self._split(self._kernels, left, window * 1e9 * self._busy)
                self._split(self._pending, left, window * 1e9)
            # Time before a first window, or with no joules: no row's.
            self._pending.clear()
            self._kernels.clear()
            self._pending_j, self._busy = 0.0, 0.0
            self._spent.clear()

    def _split(self, pending: dict[str, float], joules: float, window_ns: float) -> float:
        """JOULES, as much of them as the rows' time covers of WINDOW_NS (work outside
        probed kernels or tasks is no row's), split by the rows' time; what is left."""
        whole = sum(pending.values())
        if whole <= 0 or window_ns <= 0:
            return joules
        covered = min(1.0, whole / window_ns)
        for ref, ns in pending.items():
            share = joules * covered * ns / whole
            self.joules[ref] = self.joules.get(ref, 0.0) + share
            self.attributed_j += share
        return joules * (1.0 - covered)

    def forget(self, live: set[str]) -> None:
        """Rows gone from the engine: their joules stay counted in attributed_j."""
        for table in (self.joules, self._wall_seen, self._pending, self._kernels):
            for ref in [r for r in table if r not in live]:
                del table[ref]

    def split(self) -> tuple[EnergySplit, ...]:
        if not self.measured_j:
            return ()
        attributed = min(self.attributed_j, self.measured_j)
        return (EnergySplit("gpu", self.method, round(self.measured_j, 9), round(attributed, 9)),)
