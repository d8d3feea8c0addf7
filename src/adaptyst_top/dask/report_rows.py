"""The Dask plugin's placement report (DevicePlacement.report): a row per task name's
calls in one size bucket, from its stream and the runs' figures by (bucket, kind,
node), and the plugin's own figures."""

from __future__ import annotations

from typing import Any

from adaptyst_top.dask.placed import VERSION
from adaptyst_top.placement.learned_stream import LearnedStream


def row_of(
    name: str, bucket: int, stream: LearnedStream, figures: dict[tuple[int, str, str], list[float]]
) -> dict[str, Any]:
    runs: dict[str, int] = {}
    secs: dict[str, float] = {}
    joules: dict[str, list[float]] = {}
    nodes: dict[str, int] = {}
    for (b, kind, node), (n, total, j, nj, _) in figures.items():
        if b != bucket:
            continue
        add(runs, kind, int(n))
        add(secs, kind, total)
        if n:
            add(nodes, node, int(n))
        js = joules.setdefault(kind, [0.0, 0])
        js[0], js[1] = js[0] + j, js[1] + nj
    mean_ms = {k: round(1e3 * t / runs[k], 4) for k, t in secs.items() if runs[k]}
    mean_mj = {k: round(1e3 * j / n, 4) for k, (j, n) in joules.items() if n}
    here = mean_ms.get(stream.assigned)
    gain = None
    if here is not None and "cpu" in mean_ms and mean_ms["cpu"] > 0:
        gain = round(1 - here / mean_ms["cpu"], 4)
    return {
        "task": name,
        "size_bucket": bucket,
        "device": stream.assigned,
        "runs": runs,
        "mean_ms": mean_ms,
        "mean_mj": mean_mj,
        "failed": dict(stream.failures),
        "nodes": nodes,
        "moves": stream.moves,
        "explorations": stream.explorations,
        "gain_vs_cpu": gain,
        "predicted_ms": stream.predicted_ms(),
        "predicted_factor": stream.predicted_factor(),
    }


def add(counts: dict[str, Any], key: str, n: float) -> None:
    counts[key] = counts.get(key, 0) + n


def report_of(p: Any) -> dict[str, Any]:
    """P: the DevicePlacement (an import of it here would be a cycle)."""
    rows = [
        row_of(name, bucket, stream, named.figures)
        for name, named in sorted(p.names.items())
        for bucket, stream in sorted(named.streams.items())
    ]
    per_task = p.place_ns / p.placed / 1e3 if p.placed else None
    return {
        "version": VERSION,
        "objective": p.objective,
        "placed": p.placed,
        "place_us_per_task": None if per_task is None else round(per_task, 2),
        "ignored_events": p.ignored,
        "energy_method": p.energy_how,
        "names": {"kept": len(p.names), "cap": p.names.cap, "dropped": p.names.dropped},
        "sizes": dict(p.sizes),
        "tasks": rows,
    }
