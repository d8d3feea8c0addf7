"""How the engine's rows read in a snapshot: one entry per row and key, latencies net of
the probe's own cost (raw figures kept alongside), histograms as non-empty buckets."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from adaptyst_top.collectors import overhead as ov
from adaptyst_top.collectors.histogram import percentiles
from adaptyst_top.collectors.probe_model import ProbeGroup, Row

LATENCY_FIELDS = ("mean_ns", "p50_ns", "p95_ns", "p99_ns", "min_ns", "max_ns")


def row_entries(
    row: Row, cost: ov.ClassCost, bpf_ns: float | None, with_hist: bool = True
) -> list[dict[str, Any]]:
    """A row's snapshot entries: one per key (one for an unsplit probe)."""
    keys: Iterable[Any] = row.stats.keys() or [None]
    entries = []
    for key in keys:
        count, total, lo, hi = row.stats.get(key, (0, 0, 0, 0))
        e: dict[str, Any] = {
            "id": row.id,
            "spec": row.spec.text,
            "name": row.name,
            "kind": row.spec.kind,
            "key": key,
            "state": row.state,
            "target": row.path,
            "class": row.cls,
            "count": count,
            "rate_hz": round(row.rates.get(key, 0.0), 3),
            "overhead_ns_per_hit": round(cost.per_hit_ns, 1),
            "overhead_source": cost.source,
            "bpf_ns_per_hit": None if bpf_ns is None else round(bpf_ns, 1),
        }
        if row.spec.measures_latency:
            hist = row.hist.get(key, {})
            lat = row.lat_cache.get(key)
            if lat is None or lat[0] != (count, cost.in_interval_ns):  # only on change
                lat = (
                    (count, cost.in_interval_ns),
                    latency_fields(count, total, lo, hi, hist, cost),
                )
                row.lat_cache[key] = lat
            e.update(lat[1])
            # Non-empty log-linear buckets [index, count] (histogram.bucket_bounds
            # gives each one's ns range): the detail view and replays need them.
            if with_hist:
                cached = row.hist_lists.get(key)
                if cached is None or cached[0] != count:  # rebuilt only on change
                    cached = (count, sorted([b, c] for b, c in hist.items() if c))
                    row.hist_lists[key] = cached
                e["hist"] = cached[1]
        else:  # a count-only probe: the contract's latency fields, empty
            e.update(dict.fromkeys(LATENCY_FIELDS))
        if row.error:
            e["error"] = row.error
        entries.append(e)
    return entries


def latency_fields(
    count: int, total: int, lo: int, hi: int, hist: dict[int, int], cost: ov.ClassCost
) -> dict[str, Any]:
    """Latencies net of the probes' own cost inside the interval; raw kept alongside."""
    if count == 0:
        none = dict.fromkeys(LATENCY_FIELDS)
        return {**none, "raw": dict(none)}
    off = cost.in_interval_ns

    # Interpolation inside a bucket can overshoot the exact extremes; clamp to them.
    p50, p95, p99 = (
        None if v is None else min(max(v, float(lo)), float(hi))
        for v in percentiles(hist, (0.50, 0.95, 0.99))
    )
    raw = {
        "mean_ns": total / count,
        "p50_ns": p50,
        "p95_ns": p95,
        "p99_ns": p99,
        "min_ns": float(lo),
        "max_ns": float(hi),
    }
    net = {k: None if v is None else round(max(0.0, v - off), 1) for k, v in raw.items()}
    return {**net, "raw": {k: None if v is None else round(v, 1) for k, v in raw.items()}}


def group_entry(group: ProbeGroup) -> dict[str, Any]:
    spec = group.spec
    return {
        "id": None,
        "spec": group.spec_text,
        "name": spec.label if spec else group.spec_text,
        "kind": spec.kind if spec else None,
        "key": None,
        "state": "error" if group.state == "error" else "pending",
        "count": 0,
        "rate_hz": 0.0,
        **dict.fromkeys(LATENCY_FIELDS),
        "overhead_ns_per_hit": None,
        "error": group.error or None,
    }
