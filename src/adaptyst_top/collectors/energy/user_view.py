"""What a user of the agent sees of energy: their own attributed joules as they stood at
the last boundary of a period (user_energy_period_s, a minute by default), and never a
node-wide counter.

A device's energy counter (RAPL's package, a GPU's NVML total) moves with every user's
work: served to everyone once a second it is the side channel the kernel closed in 5.10
(PLATYPUS, CVE-2020-8694, made energy_uj root-only): user A read +37 J in each second of
user B's spin. So a user's snapshot carries no device power or energy, no measured
total in the energy split, no idle figure; only the joules charged to their own probe
rows and their own GPU processes. Those are shares of the same counter (a row gets
energy x its on-CPU ns / the node's busy ns, and busy time is public in /proc/stat), so
they too are released only at period boundaries of the agent's clock, the same
instants for every connection: a new connection waits for the next boundary, and many
connections in other phases learn nothing finer. Root, the admin group and the
agent's energy_groups get the counters (docs/safety.md says why a minute is enough)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from adaptyst_top.snapshot import DeviceReading, ProbeEntry, Snapshot

ENERGY_PERIOD_S = 60.0
NODE_ENERGY_NOTE = "node-wide power and energy are root's (docs/safety.md)"
_ProbeKey = tuple[str, str, str]


def _key(p: ProbeEntry) -> _ProbeKey:
    return (p.spec, p.name, repr(p.key))


class OwnEnergy:
    """One connection's view of energy, on boundaries of the agent's clock."""

    def __init__(
        self, period_s: float = ENERGY_PERIOD_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.period_s = period_s
        self._clock = clock
        self._period: int | None = None  # the period whose start the held figures are of
        self._probes: dict[_ProbeKey, float | None] = {}
        self._procs: dict[tuple[str, int], Any] = {}

    def apply(self, snap: Snapshot) -> Snapshot:
        """SNAP as this user may see it (a copy; SNAP is never changed)."""
        period = int(self._clock() // self.period_s) if self.period_s > 0 else None
        if period is None or (self._period is not None and period != self._period):
            self._probes = {_key(p): p.energy_j for p in snap.probes}
            self._procs = {
                (d.id, int(p["pid"])): p.get("energy_j")
                for d in snap.devices
                for p in _processes(d)
            }
        self._period = period
        probes = tuple(self._probe(p) for p in snap.probes)
        devices = tuple(self._device(d) for d in snap.devices)
        return dataclasses.replace(snap, probes=probes, devices=devices, energy_split=())

    def _probe(self, p: ProbeEntry) -> ProbeEntry:
        held = self._probes.get(_key(p))
        if held == p.energy_j:
            return p
        return dataclasses.replace(
            p, energy_j=held, energy_method=p.energy_method if held else None
        )

    def _device(self, d: DeviceReading) -> DeviceReading:
        extra = {k: v for k, v in d.extra.items() if k != "idle_j"}
        if "processes" in extra:
            extra["processes"] = [self._process(d.id, p) for p in _processes(d)]
        had = d.power_w is not None or d.energy_j is not None
        return dataclasses.replace(
            d,
            power_w=None,
            energy_j=None,
            energy_source=None,
            energy_method=None,
            note=NODE_ENERGY_NOTE if had else d.note,
            extra=extra,
        )

    def _process(self, device: str, p: dict[str, Any]) -> dict[str, Any]:
        if "energy_j" not in p:
            return p
        held = self._procs.get((device, int(p["pid"])))
        out = {k: v for k, v in p.items() if k != "energy_j"}
        if held is not None:
            out["energy_j"] = held
        return out


def _processes(d: DeviceReading) -> list[dict[str, Any]]:
    procs = d.extra.get("processes")
    if not isinstance(procs, list):
        return []
    return [p for p in procs if isinstance(p, dict) and isinstance(p.get("pid"), int)]


__all__ = ["ENERGY_PERIOD_S", "NODE_ENERGY_NOTE", "OwnEnergy"]
