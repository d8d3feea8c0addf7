"""A snapshot's per-process probe rows named by MPI rank, in the user's own process.

The engine counts a job's processes apart and says each one's pid; the rank is read here,
from the process's environment, by the user's monitor (system/mpi_ranks.py says why never
by root's agent)."""

from __future__ import annotations

from dataclasses import replace

from adaptyst_top.snapshot import ProbeEntry, Snapshot
from adaptyst_top.system.mpi_ranks import RankNames


def with_ranks(snap: Snapshot, names: RankNames) -> Snapshot:
    """SNAP with each process's share of a row named by its rank, where it has one. The
    processes probed are read as they come (once each): a rank that ends before its
    first hit is shown keeps the name it had."""
    if snap.target is not None:
        for pid in snap.target.pids:
            names.rank_of(pid)
    if not any(p.parts for p in snap.probes):
        return snap
    return replace(snap, probes=tuple(_named(p, names) for p in snap.probes))


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
