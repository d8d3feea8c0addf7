"""One clock, one thread's worth of work: every source read once per tick into a snapshot.

The snapshot is the contract shared by `record`, the TUI and the advisor (docs/data-flow.md).
"""

from __future__ import annotations

import socket
import time
from dataclasses import asdict
from typing import Any

from adaptyst_top.collectors.devices import DeviceSweep
from adaptyst_top.collectors.probe_engine import ProbeEngine


class Hub:
    def __init__(
        self, engine: ProbeEngine | None = None, devices: DeviceSweep | None = None
    ) -> None:
        self.engine = engine
        self.devices = devices
        self.t0 = time.monotonic()
        self.host = socket.gethostname()
        self._warned = 0

    def snapshot(self, with_hist: bool = True) -> dict[str, Any]:
        """with_hist=False leaves out the probes' histograms (only a detail view needs them)."""
        probes: list[dict[str, Any]] = []
        warnings: list[str] = []
        if self.engine is not None:
            self.engine.read()
            probes = self.engine.snapshot_rows(with_hist)
            warnings = self.engine.warnings[self._warned :]
            self._warned = len(self.engine.warnings)
        devices = [] if self.devices is None else [d.to_json() for d in self.devices.read()]
        snap: dict[str, Any] = {
            "t": round(time.monotonic() - self.t0, 3),
            "host": self.host,
            "probes": probes,
            "devices": devices,
            "tasks": [],
            "advice": [],
        }
        if self.devices is not None:
            snap["device_sources"] = [asdict(s) for s in self.devices.sources()]
        if self.engine is not None:
            snap["overhead"] = {
                "share": self.engine.overhead_share,
                "budget": self.engine.budget,
                "calibration": _calibration_state(self.engine),
            }
            if self.engine.target_ended:
                snap["target_ended"] = True
        if warnings:
            snap["warnings"] = warnings
        return snap


def _calibration_state(engine: ProbeEngine) -> str:
    if engine.costs.error:
        return f"default figures ({engine.costs.error})"
    sources = {c.source for c in engine.costs.costs.values()}
    return "calibrated" if sources == {"calibrated"} else "pending"
