"""Joules beside every latency: each probe row's share of the CPU's energy.

A row's calls are charged by their time on a CPU (measured in the kernel: a call that
sleeps costs little, one that spins a core's share), never by wall time. The CPU's
energy over an interval (RAPL where readable, else the stated power model, labelled
`estimate`) is split over the node's busy CPU time in it: a row gets
`energy × its on-CPU ns / max(busy ns, the rows' on-CPU ns together)`, so the rows never
add up to more than was measured. Nested probes (a function and one it calls) each count
their calls' time; where they overlap they share the interval's energy rather than
exceed it, and the rows together never get more than the session's own processes ran
(collectors/energy/scope_cpu.py), so sessions of different users never add up to more than the CPU's
energy either. What no row is charged is kept apart (`EnergySplit`), never spread over
rows.

Devices are read less often than probes (DEVICE_PERIOD_S): on-CPU time waits until the
next energy reading and is charged from it, so no interval's time goes uncharged. The
node's busy time comes from /proc/stat, in scheduler ticks (10 ms per CPU): energy and
time wait together until the node has been busy MIN_SPLIT_TICKS ticks per CPU, or a
quiet interval (0 ticks, one call's 0.1 ms pending) would hand a row all of its energy.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence

from adaptyst_top.collectors.energy.busy import system_busy_ns
from adaptyst_top.collectors.energy.gpu_tasks import GpuTaskEnergy
from adaptyst_top.collectors.energy.scope_cpu import ScopeCpu
from adaptyst_top.snapshot import DeviceReading, EnergySplit, ProbeEntry

CPU_METHOD = "{source}-oncpu"  # the rows' energy_method: rapl-oncpu, estimate-oncpu, ...
# /proc/stat's busy time is off by up to a tick per CPU at each end: 10 ticks keep that
# under ~20% on a quiet node, and are reached within a reading on a busy one.
MIN_SPLIT_TICKS = 10
MIN_SPLIT_NS = MIN_SPLIT_TICKS * (1_000_000_000 // os.sysconf("SC_CLK_TCK")) * (os.cpu_count() or 1)


class ProbeEnergy:
    def __init__(
        self,
        busy_ns: Callable[[], int] = system_busy_ns,
        min_split_ns: int = MIN_SPLIT_NS,
        scope: ScopeCpu | None = None,
    ) -> None:
        """SCOPE: the session's processes (None: every process, root's node-wide probes)."""
        self.busy_ns = busy_ns
        self.min_split_ns = min_split_ns
        self.scope = scope
        self._pending_scope = 0
        self.gpu = GpuTaskEnergy(scope.holds if scope is not None else lambda pid: True)
        self._pending_j = 0.0
        self._cpu_seen: dict[str, int] = {}  # row ref -> its on-CPU ns at the last read
        self._pending: dict[str, int] = {}  # row ref -> on-CPU ns not charged yet
        self._pending_busy = 0
        self._busy: int | None = None
        self._energy: dict[str, float] = {}  # CPU device id -> its last energy reading
        self._joules: dict[str, float] = {}  # row ref -> joules charged so far
        self.method: str | None = None
        self.measured_j = 0.0  # CPU energy over the intervals split
        self._out: dict[str, tuple[ProbeEntry, float, ProbeEntry]] = {}
        self._gone_j = 0.0  # joules of rows since removed (their refs are dropped)
        # id(entry) -> it and its ref: the engine hands back an idle row's entry as it
        # was, so most rows cost no ref string a tick (as in the probes pane).
        self._ref_of: dict[int, tuple[ProbeEntry, str]] = {}

    def attribute(
        self, entries: Sequence[ProbeEntry], devices: Sequence[DeviceReading]
    ) -> tuple[list[ProbeEntry], tuple[EnergySplit, ...]]:
        """ENTRIES with their joules so far, and the CPU's split."""
        busy = self.busy_ns()
        if self._busy is not None:
            self._pending_busy += max(0, busy - self._busy)
        self._busy = busy
        refs = self._refs(entries)
        for e, ref in zip(entries, refs, strict=True):
            if e.cpu_ns is None:
                continue
            seen = self._cpu_seen.get(ref, 0)
            if e.cpu_ns > seen:
                self._pending[ref] = self._pending.get(ref, 0) + e.cpu_ns - seen
                # Never lowered: a new cost figure (calibration) nets the total again,
                # and its regrowth was charged once already.
                self._cpu_seen[ref] = e.cpu_ns
        self._forget_removed(entries)
        self.gpu.update(entries, refs, devices)
        spent, source = self._cpu_energy(devices)
        if spent is not None and source is not None:
            if self.scope is not None:  # at each new reading: a scan of /proc, not per ask
                self._pending_scope += self.scope.delta_ns()
            if spent <= 0:  # a first reading, or a counter restarted: nothing to charge
                self._start_over()
            else:
                self._pending_j += spent
                if self._pending_busy >= self.min_split_ns:
                    self._split(self._pending_j, CPU_METHOD.format(source=source))
                    self._start_over()
        out = [self._with_energy(e, ref) for e, ref in zip(entries, refs, strict=True)]
        return out, self._splits()

    def _start_over(self) -> None:
        self._pending.clear()
        self._pending_busy, self._pending_j, self._pending_scope = 0, 0.0, 0

    def _refs(self, entries: Sequence[ProbeEntry]) -> list[str]:
        known, self._ref_of = self._ref_of, {}
        refs = []
        for e in entries:
            last = known.get(id(e))
            ref = last[1] if last is not None and last[0] is e else e.ref.text
            self._ref_of[id(e)] = (e, ref)
            refs.append(ref)
        return refs

    def _forget_removed(self, entries: Sequence[ProbeEntry]) -> None:
        """Rows gone from the engine (removed specs): their refs never come back (group
        ids only grow), so only their joules are kept, as one figure."""
        if len(self._cpu_seen) <= len(entries):
            return
        live = {e.ref.text for e in entries}
        self.gpu.forget(live)
        for ref in [r for r in self._cpu_seen if r not in live]:
            del self._cpu_seen[ref]
            self._pending.pop(ref, None)
            self._out.pop(ref, None)
            self._gone_j += self._joules.pop(ref, 0.0)

    def _cpu_energy(self, devices: Sequence[DeviceReading]) -> tuple[float | None, str | None]:
        """The CPU's energy since its last new reading (None: no new reading), and its
        source. A device whose reading has not moved on leaves the time pending."""
        spent: float | None = None
        source = None
        for d in devices:
            if d.kind != "cpu" or d.energy_j is None:
                continue
            last, self._energy[d.id] = self._energy.get(d.id), d.energy_j
            if last is None or d.energy_j != last:
                spent = (spent or 0.0) + (0.0 if last is None else max(0.0, d.energy_j - last))
                source = d.energy_source
        return spent, source

    def _split(self, spent: float, method: str) -> None:
        used = sum(self._pending.values())
        whole = max(self._pending_busy, used)
        if whole <= 0:
            return
        self.method = method
        self.measured_j += spent
        scale = 1.0
        if self.scope is not None and used > 0:  # never more than its processes ran
            scale = min(1.0, min(self._pending_scope, self._pending_busy) / used)
        for ref, ns in self._pending.items():
            self._joules[ref] = self._joules.get(ref, 0.0) + spent * ns / whole * scale

    def _with_energy(self, e: ProbeEntry, ref: str) -> ProbeEntry:
        """E with its joules: its on-CPU share, and a GPU task's share of the GPU's;
        the method names each part (estimate-oncpu+nvml-process-util)."""
        gpu_j = self.gpu.joules.get(ref)
        cpu = e.cpu_ns is not None and self.method is not None
        if not cpu and gpu_j is None:
            return e
        joules = (self._joules.get(ref, 0.0) if cpu else 0.0) + (gpu_j or 0.0)
        last = self._out.get(ref)
        if last is not None and last[0] is e and last[1] == joules:
            return last[2]  # an idle row: the entry handed out last time
        method = "+".join(
            m for m, on in ((self.method, cpu), (self.gpu.method, gpu_j is not None)) if on and m
        )
        out = dataclasses.replace(e, energy_j=round(joules, 9), energy_method=method)
        self._out[ref] = (e, joules, out)
        return out

    def _splits(self) -> tuple[EnergySplit, ...]:
        if self.method is None:
            return self.gpu.split()
        attributed = min(self.measured_j, self._gone_j + sum(self._joules.values()))
        cpu = EnergySplit("cpu", self.method, round(self.measured_j, 9), round(attributed, 9))
        return (cpu, *self.gpu.split())
