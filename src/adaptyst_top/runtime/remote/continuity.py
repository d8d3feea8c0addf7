"""One session across agent restarts: a client whose agent came back opens a new session
there, whose clock and counters start at 0. Here the client's snapshots go on from the
last one before the break: the clock keeps running, and each probe's count, histogram
and latencies, and each device's energy, add the new session's to what came before.
Hits and joules between that last snapshot and the break are not seen by anyone: the
warning of the reconnect says how long the gap was."""

from __future__ import annotations

import math
import time
from dataclasses import replace

from adaptyst_top.runtime.remote.figures import FigureCheck
from adaptyst_top.snapshot import Latency, ProbeEntry, ProbeKey, ProbeState, Snapshot
from adaptyst_top.snapshot.histogram import NBUCKETS, percentiles

Identity = tuple[str, str, str | None, ProbeKey]


def identity(p: ProbeEntry) -> Identity:
    """A probe row as the same across sessions (the agent's refs are renumbered)."""
    return (p.spec, p.name, p.target, p.key)


class Continuity:
    """carry() each snapshot of the agent; broke() when a new agent session replaced it."""

    def __init__(self) -> None:
        self.last: Snapshot | None = None  # as carried (what the user saw last)
        self._last_at = time.monotonic()
        self._t0 = 0.0  # the new session's t=0 on the run's clock
        self._probes: dict[Identity, ProbeEntry] = {}
        self._energy: dict[str, float] = {}
        self._told = -1.0  # the last t given out: each line's t is later than the one before
        self._check = FigureCheck()  # one agent session's figures, believed only if they can be

    def _later(self, t: float) -> float:
        """T, or a millisecond after the last t given out: a held line and the new
        session's first snapshot can fall in the same millisecond (broke() sets the new
        session's t=0 to now), and two lines of one run never share a time."""
        t = max(t, round(self._told + 0.001, 3))
        self._told = t
        return t

    def now(self) -> float:
        """The run's clock now (for a snapshot that the agent did not give)."""
        if self.last is None:
            return 0.0
        return round(self.last.t + time.monotonic() - self._last_at, 3)

    def broke(self) -> float:
        """A new session starts now: what came before is its base. The gap (s) since
        the last snapshot, whose hits were never read."""
        gap = time.monotonic() - self._last_at if self.last is not None else 0.0
        self._check.reset()
        if self.last is not None:
            self._t0 = self.now()
            self._probes = {identity(p): p for p in self.last.probes if p.count}
            self._energy = {d.id: d.energy_j for d in self.last.devices if d.energy_j is not None}
        return gap

    def forget(self, spec: str) -> None:
        """SPEC was removed: added again, it starts from 0."""
        self._probes = {k: p for k, p in self._probes.items() if p.spec != spec}

    def carry(self, snap: Snapshot) -> Snapshot:
        """SNAP on the run's clock and counts. What the agent sent is only parsed, not
        believed: a sum that would not be finite, a negative count or a bucket out of
        range is not carried (the new session's own figure stands); within a session,
        figures.py drops what cannot be."""
        snap = self._check.check(snap, time.monotonic())
        if self._t0 or self._probes or self._energy:
            snap = replace(
                snap,
                t=_sum(self._t0, snap.t, 3),
                probes=tuple(self._probe(p) for p in snap.probes),
                devices=tuple(
                    d
                    if d.energy_j is None or d.id not in self._energy
                    else replace(d, energy_j=_sum(self._energy[d.id], d.energy_j))
                    for d in snap.devices
                ),
            )
        t = self._later(snap.t)
        if t != snap.t:
            snap = replace(snap, t=t)
        self.last, self._last_at = snap, time.monotonic()
        return snap

    def held(self, why: str, ended: bool = False) -> Snapshot:
        """The last snapshot at the run's time now, nothing counting, saying WHY; with
        ENDED (the agent ended the session's probes), no row is shown attached."""
        if self.last is None:
            return Snapshot(t=self._later(0.0), host="", warnings=(why,))
        state: dict[str, ProbeState] = {"attached": "ended", "pending": "ended"} if ended else {}
        # A profile's stacks are what an interval added: a held line adds none (repeated,
        # every held line would count the last interval's samples again).
        profile = self.last.profile
        return replace(
            self.last,
            t=self._later(self.now()),
            profile=None if profile is None else replace(profile, stacks=()),
            probes=tuple(
                replace(p, rate_hz=0.0, state=state.get(p.state, p.state)) for p in self.last.probes
            ),
            warnings=(why,),
            final=False,
        )

    def _probe(self, new: ProbeEntry) -> ProbeEntry:
        old = self._probes.get(identity(new))
        return new if old is None else combined(old, new)


def combined(old: ProbeEntry, new: ProbeEntry) -> ProbeEntry:
    """One row's figures of two sessions (or two nodes) as one: counts summed,
    histograms merged, means weighed by count, the extremes of both; NEW's other fields."""
    if old.count < 0 or new.count < 0:
        return new
    count = old.count + new.count
    merged: tuple[tuple[int, int], ...] | None = None
    if _sane(old.hist) and _sane(new.hist):
        assert old.hist is not None and new.hist is not None
        buckets = dict(old.hist)
        for bucket, n in new.hist:
            buckets[bucket] = buckets.get(bucket, 0) + n
        merged = tuple(sorted(buckets.items()))
    # A sampled row's means are over its timed hits: weighed by those.
    timed = None if old.timed is None or new.timed is None else old.timed + new.timed
    n_old, n_new = (old.count, new.count) if timed is None else (old.timed, new.timed)
    raw = _merged(old.raw, new.raw, n_old or 0, n_new or 0, merged)
    net = _merged(old.latency, new.latency, n_old or 0, n_new or 0, None) or new.latency
    if merged is not None and raw is not None and new.raw is not None:
        # The merged histogram's percentiles are raw ones: net of the same cost.
        off = (new.raw.mean_ns or 0.0) - (new.latency.mean_ns or 0.0)
        p50, p95, p99 = (
            None if v is None else round(max(0.0, v - off), 1)
            for v in (raw.p50_ns, raw.p95_ns, raw.p99_ns)
        )
        net = replace(net, p50_ns=p50, p95_ns=p95, p99_ns=p99)
    hist = merged if merged is not None else new.hist
    return replace(new, count=count, timed=timed, hist=hist, raw=raw, latency=net)


def _merged(
    old: Latency | None,
    new: Latency | None,
    n_old: int,
    n_new: int,
    hist: tuple[tuple[int, int], ...] | None,
) -> Latency | None:
    """Two sessions' figures as one: the mean weighted by count, the extremes of both,
    the percentiles of the merged histogram (or, without one, the new session's)."""
    if new is None or old is None or old.mean_ns is None:
        return new
    if new.mean_ns is None or n_new == 0:
        return old
    lows = [v for v in (old.min_ns, new.min_ns) if v is not None]
    highs = [v for v in (old.max_ns, new.max_ns) if v is not None]
    lo, hi = (min(lows) if lows else None), (max(highs) if highs else None)
    mean = (old.mean_ns * n_old + new.mean_ns * n_new) / (n_old + n_new)
    if not math.isfinite(mean):
        return new
    p50, p95, p99 = new.p50_ns, new.p95_ns, new.p99_ns
    if hist:
        p50, p95, p99 = (
            None if v is None else round(_clamp(v, lo, hi), 1)
            for v in percentiles(dict(hist), (0.50, 0.95, 0.99))
        )
    return Latency(round(mean, 1), p50, p95, p99, lo, hi)


def _sum(a: float, b: float, digits: int | None = None) -> float:
    """A + B, or B alone when the sum is not finite (two huge figures)."""
    total = a + b
    if not math.isfinite(total):
        return b
    return total if digits is None else round(total, digits)


def _sane(hist: tuple[tuple[int, int], ...] | None) -> bool:
    return hist is not None and all(0 <= b < NBUCKETS and n >= 0 for b, n in hist)


def _clamp(v: float, lo: float | None, hi: float | None) -> float:
    """Interpolation inside a bucket can overshoot the exact extremes."""
    return min(max(v, lo if lo is not None else v), hi if hi is not None else v)
