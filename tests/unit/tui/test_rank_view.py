"""A job's probe rows merged, per rank and per node, from a real recording of an MPI run
(mpiexec -n 2 of tests/support/targets/mpi_slow.c: its last rank computes twice as long)."""

from __future__ import annotations

import json

from adaptyst_top.snapshot import ProbeEntry, ProcessPart, Snapshot
from adaptyst_top.tui.rank_view import imbalance_cell, rows_of, who
from tests.support.paths import DATA

RECORDING = DATA / "mpi-ranks-recording.jsonl"


def _last() -> Snapshot:
    return Snapshot.from_json(json.loads(RECORDING.read_text().splitlines()[-1]))


def _compute(snap: Snapshot) -> ProbeEntry:
    return next(p for p in snap.probes if p.name == "compute")


def test_merged_rows_are_the_entries_with_the_slow_rank_named() -> None:
    snap = _last()
    rows = rows_of(snap.probes, "merged", snap.host)
    assert [e for _, e in rows] == list(snap.probes)
    compute = _compute(snap)
    assert compute.imbalance is not None and compute.imbalance > 1.2
    assert imbalance_cell(compute) == f"{compute.imbalance:.2f} r1"


def test_per_rank_rows_share_the_entry_and_read_against_the_mean() -> None:
    snap = _last()
    compute = _compute(snap)
    rows = dict(rows_of([compute], "rank", snap.host))
    assert len(rows) == 2 and all(k.startswith(compute.ref.text) for k in rows)
    by_rank = {e.parts[0].rank: e for e in rows.values()}
    assert sum(e.count for e in by_rank.values()) == compute.count
    assert by_rank[1].imbalance == compute.imbalance
    assert by_rank[0].imbalance is not None and by_rank[0].imbalance < 1
    assert by_rank[1].name == "compute · r1" and by_rank[1].ref == compute.ref


def test_per_node_rows_sum_their_ranks() -> None:
    snap = _last()
    compute = _compute(snap)
    ((_key, row),) = rows_of([compute], "node", snap.host)
    assert row.count == compute.count and row.name == f"compute · {snap.host} (2 ranks)"
    assert row.imbalance == 1.0  # one node: the mean itself
    a = ProcessPart(pid=1, rank=0, node="n1", count=2, total_ns=10.0)
    b = ProcessPart(pid=2, rank=1, node="n2", count=2, total_ns=30.0)
    two = ProbeEntry(group=0, id=0, spec="s", name="f", kind="uprobe", parts=(a, b))
    shown = {e.name: e.imbalance for _, e in rows_of([two], "node", "here")}
    assert shown == {"f · n1 (1 ranks)": 0.5, "f · n2 (1 ranks)": 1.5}


def test_a_part_without_a_rank_is_its_process() -> None:
    assert who(ProcessPart(pid=7)) == "pid 7" and who(ProcessPart(pid=7, rank=3)) == "r3"
    assert who(ProcessPart(pid=7, rank=3, node="n2")) == "r3@n2"
    plain = ProbeEntry(group=0, id=0, spec="s", name="f", kind="uprobe")
    assert imbalance_cell(plain) == "-"
    assert rows_of([plain], "rank", "h") == [(plain.ref.text, plain)]
