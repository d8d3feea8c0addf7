"""Probe rows of a job counted per process, read three ways (`R` switches): merged (a row
per function, its imbalance over the ranks beside it), per rank (a row per function and
rank, each with its time over the ranks' mean) or per node (a row per function and node).
Pure: entries in, (row key, entry) pairs out, each shown by rows.probe_row."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Literal

from adaptyst_top.snapshot import Latency, ProbeEntry, ProcessPart

View = Literal["merged", "rank", "node"]
VIEWS: tuple[View, ...] = ("merged", "rank", "node")


def who(part: ProcessPart) -> str:
    """A part as its row names it, short (the name column is the first to be cut): its
    rank, else its process; and its node where a job's nodes are merged."""
    name = f"r{part.rank}" if part.rank is not None else f"pid {part.pid}"
    return name + (f"@{part.node}" if part.node else "")


def rows_of(entries: Sequence[ProbeEntry], view: View, host: str) -> list[tuple[str, ProbeEntry]]:
    """The table's rows for ENTRIES in VIEW (HOST: the node of a part that names none)."""
    out: list[tuple[str, ProbeEntry]] = []
    for entry in entries:
        if view == "merged" or not entry.parts:
            out.append((entry.ref.text, entry))
        elif view == "rank":
            out += _per_rank(entry)
        else:
            out += _per_node(entry, host)
    return out


def _mean_weight(parts: Iterable[ProcessPart]) -> float:
    weights = [p.weight for p in parts]
    return sum(weights) / len(weights) if weights else 0.0


def _per_rank(entry: ProbeEntry) -> list[tuple[str, ProbeEntry]]:
    mean = _mean_weight(entry.parts)
    rows = []
    for part in entry.parts:
        ratio = round(part.weight / mean, 4) if mean > 0 else None
        shown = replace(
            entry,
            name=f"{entry.name} · {who(part)}",
            count=part.count,
            rate_hz=part.rate_hz,
            latency=part.latency,
            raw=None,
            hist=None,
            energy_j=None,
            cpu_ns=None,
            parts=(part,),
            imbalance=ratio,
            imbalance_pid=part.pid,
        )
        rows.append((f"{entry.ref.text}\x1fp{part.node or ''}:{part.pid}", shown))
    return rows


def _per_node(entry: ProbeEntry, host: str) -> list[tuple[str, ProbeEntry]]:
    nodes: dict[str, list[ProcessPart]] = {}
    for part in entry.parts:
        nodes.setdefault(part.node or host, []).append(part)
    sums = {n: sum(p.weight for p in ps) for n, ps in nodes.items()}
    mean = sum(sums.values()) / len(sums) if sums else 0.0
    rows = []
    for node, parts in sorted(nodes.items()):
        count = sum(p.count for p in parts)
        timed = [p.total_ns for p in parts if p.total_ns is not None]
        mean_ns = sum(timed) / count if timed and count else None
        shown = replace(
            entry,
            name=f"{entry.name} · {node} ({len(parts)} ranks)",
            count=count,
            rate_hz=round(sum(p.rate_hz for p in parts), 3),
            latency=Latency(mean_ns=mean_ns),
            raw=None,
            hist=None,
            energy_j=None,
            cpu_ns=None,
            parts=tuple(parts),
            imbalance=round(sums[node] / mean, 4) if mean > 0 else None,
            imbalance_pid=None,
        )
        rows.append((f"{entry.ref.text}\x1fn{node}", shown))
    return rows


def imbalance_cell(entry: ProbeEntry) -> str:
    """The Imbal column: the ratio, and in a merged row the rank (or pid) that has the most."""
    if entry.imbalance is None:
        return "-"
    text = f"{entry.imbalance:.2f}"
    if len(entry.parts) > 1:  # the busiest first (a pid alone names no one process where
        top = entry.parts[0]  # a job's nodes are merged)
        text += f" r{top.rank}" if top.rank is not None else f" p{top.pid}"
    return text
