"""A row counted per process (a job's ranks), read two ways: merged, as every row is
read (one entry per key), and each process's share of it with the imbalance over them.

The kernel files each hit under (pid, key) where a module counts processes apart
(module.h's by_process); the merged figures are the same sums, minima and maxima the
kernel would have kept with one key, and the merged histogram the sum of the processes'
buckets, so a merged row reads exactly as an unsplit one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adaptyst_top.collectors.probes.bpf.keys import Stats, merge_stats
from adaptyst_top.snapshot import Latency, ProbeKey, ProcessPart

# Exited processes' shares folded together past what a module keeps (engine/exited.py):
# in a row's figures, no process's share (pid 0 is never a user process).
FOLDED_PID = 0

# Net latency figures of one process's calls: (count, total, lo, hi, buckets) -> Latency.
NetLatency = Callable[[int, int, int, int, dict[int, int]], Latency]


@dataclass
class Merged:
    """A row's figures per user key, every process's together, and per key its
    processes' own (pid -> stats, histogram, rate)."""

    stats: dict[ProbeKey, Stats] = field(default_factory=dict)
    hist: dict[ProbeKey, dict[int, int]] = field(default_factory=dict)
    rates: dict[ProbeKey, float] = field(default_factory=dict)
    by_pid: dict[ProbeKey, dict[int, tuple[Stats, dict[int, int], float]]] = field(
        default_factory=dict
    )


def merge(
    stats: dict[Any, Stats], hist: dict[Any, dict[int, int]], rates: dict[Any, float]
) -> Merged:
    """STATS, HIST and RATES keyed (pid, key), merged per key."""
    out = Merged()
    for (pid, key), s in stats.items():
        out.stats[key] = merge_stats(out.stats[key], s) if key in out.stats else s
        buckets = hist.get((pid, key), {})
        into = out.hist.setdefault(key, {})
        for b, c in buckets.items():
            into[b] = into.get(b, 0) + c
        rate = rates.get((pid, key), 0.0)
        out.rates[key] = out.rates.get(key, 0.0) + rate
        out.by_pid.setdefault(key, {})[pid] = (s, buckets, rate)
    return out


def parts_of(
    per_pid: dict[int, tuple[Stats, dict[int, int], float]],
    latency: bool,
    net: NetLatency,
    sampled: bool = False,
) -> tuple[tuple[ProcessPart, ...], float | None, int | None]:
    """Each process's share of one key (the busiest first), the imbalance over them (the
    most time, else hits, over their mean; None under two processes) and its pid.
    SAMPLED: a kind whose latencies are of its timed hits (those in the histogram)."""
    parts = []
    for pid, ((count, _total, lo, hi, _oncpu), buckets, rate) in per_pid.items():
        if pid == FOLDED_PID:
            continue
        timed = min(count, sum(buckets.values())) if sampled else count
        lat = net(timed, _total, lo, hi, buckets) if latency else Latency()
        total = None
        if latency:
            total = round(count * lat.mean_ns, 1) if lat.mean_ns is not None else 0.0
        parts.append(
            ProcessPart(pid=pid, count=count, rate_hz=round(rate, 3), total_ns=total, latency=lat)
        )
    parts.sort(key=lambda p: (-p.weight, p.pid))
    return tuple(parts), *imbalance(parts)


def imbalance(
    parts: list[ProcessPart] | tuple[ProcessPart, ...],
) -> tuple[float | None, int | None]:
    """Max over mean of PARTS' weights, and the pid of the first part with the max (PARTS
    come the busiest first: it is the first); (None, None) under two parts or with
    nothing in them."""
    if len(parts) < 2:
        return None, None
    weights = [p.weight for p in parts]
    mean = sum(weights) / len(weights)
    if mean <= 0:
        return None, None
    top = max(parts, key=lambda p: p.weight)
    return round(top.weight / mean, 4), top.pid
