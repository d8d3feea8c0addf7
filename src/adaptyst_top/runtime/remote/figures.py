"""What a client believes of an agent's figures. An agent (or a node through SSH) is
another program: its snapshot parses, and still may say what cannot be: a negative
count or one of 1e30, a count that goes back within one session, a latency, rate or
power that is negative or not finite, a device's energy that decreases, a clock that
crawls (40.004 … 40.039 s for 35 s of the client's). Such a figure is not carried: the
last sane one stands (or the row waits for one), and the snapshot says in one line
what was dropped. A new session (the agent restarted: Continuity.broke) starts over."""

from __future__ import annotations

import math
from dataclasses import replace

from adaptyst_top.snapshot import (
    LATENCY_FIELDS,
    DeviceReading,
    Latency,
    ProbeEntry,
    ProbeKey,
    Snapshot,
)

MAX_COUNT = 2**63 - 1  # a kernel map's counter; 1e30 is not one
# The agent's clock may lag the client's by a snapshot's trip; not by half of it.
CLOCK_SLACK_S = 1.0
_Row = tuple[str, str, str | None, ProbeKey]


def _row(p: ProbeEntry) -> _Row:
    return (p.spec, p.name, p.target, p.key)


def _sane(v: float | None, high: float = math.inf) -> bool:
    return v is None or (math.isfinite(v) and 0 <= v <= high)


def _latency_sane(lat: Latency | None) -> bool:
    # Read field by field: this runs on every row of every snapshot (no JSON made).
    return lat is None or all(_sane(getattr(lat, f)) for f in LATENCY_FIELDS)


class FigureCheck:
    """check() each snapshot of one agent session, in order; reset() for a new one."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._probes: dict[_Row, ProbeEntry] = {}
        self._energy: dict[str, float] = {}
        self._clock: tuple[float, float] | None = None  # (agent's t, client's monotonic)

    def check(self, snap: Snapshot, now: float) -> Snapshot:
        """SNAP with only figures that can be, and a warning naming what was not."""
        dropped: list[str] = []
        t = self._time(snap.t, now, dropped)
        probes = tuple(p for p in (self._probe(p, dropped) for p in snap.probes) if p)
        devices = tuple(self._device(d, dropped) for d in snap.devices)
        if not dropped and t == snap.t:
            return snap
        warnings = snap.warnings
        if dropped:
            more = f" (and {len(dropped) - 3} more)" if len(dropped) > 3 else ""
            line = f"dropped what the agent sent that cannot be: {'; '.join(dropped[:3])}{more}"
            warnings = (*warnings, line)
        return replace(snap, t=t, probes=probes, devices=devices, warnings=warnings)

    def _time(self, t: float, now: float, dropped: list[str]) -> float:
        last = self._clock
        if last is None:
            if not _sane(t):
                dropped.append(f"a clock of {t}")
                t = 0.0
            self._clock = (t, now)
            return t
        own = last[0] + (now - last[1])  # where the agent's clock should be
        if not _sane(t) or t < last[0] or t < last[0] + (now - last[1]) / 2 - CLOCK_SLACK_S:
            dropped.append(f"a clock that crawls ({t:g} s where {own:.3f} s was due)")
            t = round(own, 3)
        self._clock = (t, now)
        return t

    def _probe(self, p: ProbeEntry, dropped: list[str]) -> ProbeEntry | None:
        before = self._probes.get(_row(p))
        why = None
        if not 0 <= p.count <= MAX_COUNT:
            why = f"a count of {p.count} for {p.name}"
        elif before is not None and p.count < before.count:
            why = f"{p.name}'s count going back ({before.count} to {p.count})"
        elif p.timed is not None and not 0 <= p.timed <= p.count:
            why = f"{p.name}'s {p.timed} timed of {p.count}"
        elif not (_sane(p.rate_hz) and _latency_sane(p.latency) and _latency_sane(p.raw)):
            why = f"{p.name}'s latency or rate out of range"
        elif not _sane(p.energy_j) or (
            before is not None and (p.energy_j or 0.0) < (before.energy_j or 0.0)
        ):
            why = f"{p.name}'s energy going back or out of range"
        if why is None:
            self._probes[_row(p)] = p
            return p
        dropped.append(why)
        return before

    def _device(self, d: DeviceReading, dropped: list[str]) -> DeviceReading:
        before = self._energy.get(d.id)
        fixes: dict[str, float | None] = {}
        if not _sane(d.energy_j) or (
            before is not None and d.energy_j is not None and d.energy_j < before
        ):
            dropped.append(f"{d.id}'s energy going back or out of range ({d.energy_j})")
            fixes["energy_j"] = before
        elif d.energy_j is not None:
            self._energy[d.id] = d.energy_j
        if not _sane(d.power_w):
            dropped.append(f"{d.id}'s power of {d.power_w}")
            fixes["power_w"] = None
        if not _sane(d.util, 1.0):
            dropped.append(f"{d.id}'s utilisation of {d.util}")
            fixes["util"] = None
        return replace(d, **fixes) if fixes else d  # type: ignore[arg-type]


__all__ = ["CLOCK_SLACK_S", "MAX_COUNT", "FigureCheck"]
