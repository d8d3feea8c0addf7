"""A snapshot's per-process probe rows named by MPI rank, in the user's own process.

The engine counts a job's processes apart and says each one's pid; the rank is read here,
from the process's environment, by the user's monitor (system/mpi_ranks.py says why never
by root's agent)."""

from __future__ import annotations

from dataclasses import replace

from adaptyst_top.snapshot import ProbeEntry, Snapshot
from adaptyst_top.system.mpi_ranks import RankNames

# An entry the engine handed back unchanged (most rows, most ticks) and its named copy:
# named again only when the engine made a new one. Keyed by id, the entry held beside it.
Named = dict[int, tuple[ProbeEntry, ProbeEntry]]


def with_ranks(snap: Snapshot, names: RankNames, named: Named | None = None) -> Snapshot:
    """SNAP with each process's share of a row named by its rank, where it has one. The
    processes probed are read as they come (once each): a rank that ends before its
    first hit is shown keeps the name it had. NAMED: the last call's entries (kept, then
    replaced by this call's), so that an unchanged entry stays the same object."""
    if snap.target is not None:
        for pid in snap.target.pids:
            names.rank_of(pid)
    if not any(p.parts for p in snap.probes):
        return snap
    last = dict(named or {})
    probes = []
    for p in snap.probes:
        hit = last.get(id(p))
        probes.append(hit[1] if hit is not None and hit[0] is p else _named(p, names))
    if named is not None:
        named.clear()
        named.update((id(p), (p, q)) for p, q in zip(snap.probes, probes, strict=True))
    return replace(snap, probes=tuple(probes))


def _named(entry: ProbeEntry, names: RankNames) -> ProbeEntry:
    if not entry.parts:
        return entry
    # A part of another node's (a job's view from a login node) is named there.
    parts = tuple(
        part
        if part.rank is not None or part.node is not None
        else replace(part, rank=names.rank_of(part.pid))
        for part in entry.parts
    )
    return replace(entry, parts=parts)
