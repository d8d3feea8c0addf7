"""One clock, one thread's worth of work: every source read once per tick into a snapshot.

The snapshot (snapshot/) is the contract shared by `record`, the TUI and the
advisor; the hub builds the collectors' part of it.
"""

from __future__ import annotations

import socket
import time
from typing import TYPE_CHECKING

from adaptyst_top.collectors.energy.probes import ProbeEnergy
from adaptyst_top.collectors.energy.scope_cpu import ScopeCpu
from adaptyst_top.snapshot import EnergySplit, Overhead, ProbeEntry, Snapshot

if TYPE_CHECKING:  # what a launch needs is imported before its command runs, no more
    from adaptyst_top.collectors.devices.sweep import DeviceSweep
    from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
    from adaptyst_top.collectors.profile.profiler import Profiler


class Hub:
    def __init__(
        self,
        engine: ProbeEngine | None = None,
        devices: DeviceSweep | None = None,
        profiler: Profiler | None = None,
    ) -> None:
        self.engine = engine
        self.devices = devices
        self.profiler = profiler
        self.t0 = time.monotonic()
        self.host = socket.gethostname()
        self._warned = 0
        self.energy = ProbeEnergy(scope=None if engine is None else scope_of(engine))

    def snapshot(self, with_hist: bool = True) -> Snapshot:
        """with_hist=False leaves out the probes' histograms (only a detail view needs them)."""
        probes: list[ProbeEntry] = []
        split: tuple[EnergySplit, ...] = ()
        warnings: list[str] = []
        overhead = None
        if self.engine is not None:
            self.engine.read()
            probes = self.engine.snapshot_rows(with_hist)
            warnings = self.engine.warnings[self._warned :]
            self._warned = len(self.engine.warnings)
            overhead = Overhead(
                self.engine.overhead_share, self.engine.budget, _calibration_state(self.engine)
            )
        devices = [] if self.devices is None else self.devices.read()
        if probes:
            probes, split = self.energy.attribute(probes, devices)
        return Snapshot(
            t=round(time.monotonic() - self.t0, 3),
            host=self.host,
            probes=tuple(probes),
            energy_split=split,
            devices=tuple(devices),
            device_sources=None if self.devices is None else tuple(self.devices.sources()),
            overhead=overhead,
            target=None if self.engine is None else self.engine.target(),
            target_ended=self.engine is not None and self.engine.target_ended,
            warnings=tuple(warnings),
            profile=None if self.profiler is None else self.profiler.part(),
        )

    def close(self) -> None:
        if self.devices is not None:
            self.devices.close()
        if self.profiler is not None:
            self.profiler.close()


def scope_of(engine: ProbeEngine) -> ScopeCpu | None:
    """The processes whose CPU time bounds the engine's rows' energy: its scope's, else
    (an agent's user's node-wide probes) the user's; None for root's node-wide probes."""
    if engine.scope is not None:
        return ScopeCpu(pids=engine.scope_pids)
    if engine.confine is not None:
        return ScopeCpu(uid=engine.confine.uid)
    return None


def _calibration_state(engine: ProbeEngine) -> str:
    if engine.costs.error:
        return f"default figures ({engine.costs.error})"
    sources = {c.source for c in engine.costs.costs.values()}
    return "calibrated" if sources == {"calibrated"} else "pending"
