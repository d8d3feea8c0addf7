"""How the engine's rows read in a snapshot: one entry per row and key, latencies net of
the probe's own cost (raw figures kept alongside), histograms as non-empty buckets."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from adaptyst_top.collectors.probes.bpf.keys import NO_STATS
from adaptyst_top.collectors.probes.cost.class_cost import ClassCost
from adaptyst_top.collectors.probes.engine.per_process import Merged, merge, parts_of
from adaptyst_top.collectors.probes.kinds import kind_of
from adaptyst_top.collectors.probes.model import ProbeGroup, Row
from adaptyst_top.snapshot import Latency, ProbeEntry, ProbeKey
from adaptyst_top.snapshot.histogram import percentiles


def row_entries(
    row: Row,
    cost: ClassCost,
    bpf_ns: float | None,
    with_hist: bool = True,
    count_cost: ClassCost | None = None,
) -> list[ProbeEntry]:
    """A row's snapshot entries: one per key its kind shows (one for an unsplit probe,
    and for one none of whose keys are shown yet)."""
    kind = kind_of(row.spec)
    split = _merged(row)
    stats, hists, rates = (
        (row.stats, row.hist, row.rates)
        if split is None
        else (split.stats, split.hist, split.rates)
    )
    named = [(k, kind.entry_name(row.spec, row.name, k)) for k in stats]
    shown: Iterable[tuple[ProbeKey, str | None]] = [(k, n) for k, n in named if n] or [
        (None, row.name)
    ]
    measures_oncpu = row.module is not None and row.module.measures_oncpu
    entries = []
    for key, name in shown:
        count, total, lo, hi, oncpu = stats.get(key, NO_STATS)
        rate = round(rates.get(key, 0.0), 3)
        # Most rows of a wide glob are idle: their entry is the last one, as it was.
        # The total too: a hit's count and its time reach the kernel's map one after
        # the other, and a read between them must not stand for the finished figures.
        sig: tuple[object, ...] = (count, total, rate, row.state, row.error, cost.per_hit_ns)
        sig += (cost.in_interval_ns, cost.least_ns, cost.source, bpf_ns, with_hist)
        last = row.entry_cache.get(key)
        if last is not None and last[0] == sig:
            entries.append(last[1])
            continue
        net, raw, hist, timed, off = Latency(), None, None, None, None
        if row.spec.measures_latency:
            buckets = hists.get(key, {})
            # Sampled: each timed hit is in the histogram once (read after the counts: a
            # launch timed in between is in the buckets, not yet in the count).
            timed = min(count, sum(buckets.values())) if kind.sampled_latency else None
            lat = row.lat_cache.get(key)
            if lat is None or lat[0] != (count, total, cost.in_interval_ns, cost.least_ns):
                lat = (
                    (count, total, cost.in_interval_ns, cost.least_ns),
                    latency_fields(count if timed is None else timed, total, lo, hi, buckets, cost),
                )
                row.lat_cache[key] = lat
            net, raw, off = lat[1]
            if with_hist:  # the detail view and replays need them
                cached = row.hist_lists.get(key)
                if cached is None or cached[0] != (count, total):  # rebuilt only on change
                    cached = (
                        (count, total),
                        tuple(sorted((b, c) for b, c in buckets.items() if c)),
                    )
                    row.hist_lists[key] = cached
                hist = cached[1]
        entry = ProbeEntry(
            group=row.group,
            id=row.id,
            spec=row.spec.text,
            name=name or row.name,
            kind=row.spec.kind,
            key=key,
            state=row.state,
            target=row.path,
            cost_class=row.cost_class,
            count=count,
            timed=timed,
            rate_hz=rate,
            overhead_ns_per_hit=round(_per_hit_ns(cost, count_cost, count, timed), 1),
            overhead_source=cost.source,
            bpf_ns_per_hit=None if bpf_ns is None else round(bpf_ns, 1),
            # Net of the probe's own time inside the calls, as the latencies are.
            cpu_ns=_cpu_ns(kind.host_time, count, timed, oncpu, cost)
            if measures_oncpu and row.spec.measures_latency
            else None,
            latency=net,
            raw=raw,
            net_of_ns=off,
            corrected_ns=_corrected(off, cost),
            hist=hist,
            error=row.error or None,
        )
        if split is not None and key in split.by_pid:

            def part_net(n: int, t: int, lo: int, hi: int, b: dict[int, int]) -> Latency:
                return latency_fields(n, t, lo, hi, b, cost)[0]

            parts, ratio, top = parts_of(
                split.by_pid[key], row.spec.measures_latency, part_net, kind.sampled_latency
            )
            entry = dataclasses.replace(entry, parts=parts, imbalance=ratio, imbalance_pid=top)
        row.entry_cache[key] = (sig, entry)
        entries.append(entry)
    return entries


def _merged(row: Row) -> Merged | None:
    """The row's figures merged over its processes, where its module counts them apart."""
    if row.module is None or not row.module.by_process:
        return None
    # Rates fall to 0 with no new figures once an interval has no hit: interval_hits says.
    version = (row.stats_version, row.rates_version, row.interval_hits)
    if row.merged is None or row.merged[0] != version:
        row.merged = (version, merge(row.stats, row.hist, row.rates))
    merged: Merged = row.merged[1]
    return merged


def _corrected(off: float | None, cost: ClassCost) -> float | None:
    """How much less than the class's cost was taken off (the raw minimum was below it),
    or None where all of it was."""
    if off is None or off >= cost.in_interval_ns:
        return None
    return round(cost.in_interval_ns - off, 1)


def _cpu_ns(
    host_time: bool, count: int, timed: int | None, oncpu: int, cost: ClassCost
) -> int | None:
    """The hits' time on a CPU: a host thread's, net of the probe's own time in it; or a
    CPU device's (PoCL's) time of the timed launches, scaled to all of them (None: no
    launch timed on a CPU device)."""
    if host_time:
        return max(0, round(oncpu - count * cost.in_interval_ns))
    if not oncpu or not timed:
        return None
    return round(oncpu * count / timed)


def _per_hit_ns(
    cost: ClassCost, count_cost: ClassCost | None, count: int, timed: int | None
) -> float:
    """A hit's cost; a sampled row's, its timed and counted hits' together."""
    if count_cost is None or timed is None or count <= 0:
        return cost.per_hit_ns
    counted = max(0, count - timed)
    return (timed * cost.per_hit_ns + counted * count_cost.per_hit_ns) / count


def latency_fields(
    count: int, total: int, lo: int, hi: int, hist: dict[int, int], cost: ClassCost
) -> tuple[Latency, Latency, float | None]:
    """Latencies net of the probes' own cost inside the interval, the raw ones, and the
    ns taken off (None with no call)."""
    if count == 0 or lo > hi:  # lo > hi: a read between a hit's statistics and its bucket
        return Latency(), Latency(), None
    # Never more than the fastest call took: a figure that says the probe alone took
    # longer than a call is wrong for this node now, not the call.
    off = min(cost.in_interval_ns, float(lo))

    # Interpolation inside a bucket can overshoot the exact extremes; clamp to them.
    p50, p95, p99 = (
        None if v is None else min(max(v, float(lo)), float(hi))
        for v in percentiles(hist, (0.50, 0.95, 0.99))
    )
    # A mean outside the extremes is a sum that wrapped (times handed over by a target):
    # never shown as such.
    mean = min(max(total / count, float(lo)), float(hi))
    raw = (mean, p50, p95, p99, float(lo), float(hi))
    net = [None if v is None else round(max(0.0, v - off), 1) for v in raw]
    # The fastest call is net of the least the probe took, never of its median: the
    # fastest figure would otherwise read below the fastest call.
    net_lo = [lo - min(cost.least_ns, off), *(v for v in net[:2] if v is not None)]
    net[4] = round(max(0.0, min(net_lo)), 1)
    return Latency(*net), Latency(*(None if v is None else round(v, 1) for v in raw)), round(off, 1)


def group_entry(group: ProbeGroup) -> ProbeEntry:
    """A spec with no row yet (compiling), or the error that stopped it."""
    spec = group.spec
    return ProbeEntry(
        group=group.id,
        id=None,
        spec=group.spec_text,
        name=spec.label if spec else group.spec_text,
        kind=spec.kind if spec else None,
        state="error" if group.state == "error" else "pending",
        error=group.error or None,
    )
