"""Per-process probe rows named by rank in the user's own process."""

from __future__ import annotations

from adaptyst_top.runtime.ranks import with_ranks
from adaptyst_top.snapshot import ProbeEntry, ProcessPart, Snapshot
from adaptyst_top.system.mpi_ranks import RankNames


class Names(RankNames):
    def __init__(self, ranks: dict[int, int]) -> None:
        super().__init__()
        self.ranks = ranks
        self.asked: list[int] = []

    def rank_of(self, pid: int) -> int | None:
        self.asked.append(pid)
        return self.ranks.get(pid)


def _entry(*parts: ProcessPart) -> ProbeEntry:
    return ProbeEntry(group=0, id=0, spec="mpi:", name="MPI_Allreduce", kind="mpi", parts=parts)


def test_parts_are_named_and_the_rest_is_as_it_was() -> None:
    plain = _entry()
    split = _entry(ProcessPart(pid=10, count=3), ProcessPart(pid=11, count=1, rank=9))
    snap = Snapshot(t=1.0, host="n1", probes=(plain, split))
    names = Names({10: 0, 11: 1})
    out = with_ranks(snap, names)
    assert out.probes[0] is plain
    assert [(p.pid, p.rank) for p in out.probes[1].parts] == [(10, 0), (11, 9)]
    assert names.asked == [10]  # a part named already (a remote node's) is not asked


def test_a_snapshot_without_parts_is_the_same_object() -> None:
    snap = Snapshot(t=1.0, host="n1", probes=(_entry(),))
    assert with_ranks(snap, Names({})) is snap


def test_parts_survive_the_snapshots_json() -> None:
    part = ProcessPart(pid=10, rank=2, node="n1", count=3, rate_hz=1.5, total_ns=30.0)
    entry = ProbeEntry(
        group=0,
        id=0,
        spec="mpi:",
        name="MPI_Allreduce",
        kind="mpi",
        parts=(part,),
        imbalance=1.25,
        imbalance_pid=10,
    )
    snap = Snapshot(t=1.0, host="n1", probes=(entry, _entry()))
    line = snap.to_json()
    assert "parts" not in line["probes"][1] and "imbalance" not in line["probes"][1]
    assert Snapshot.from_json(line) == snap


def test_an_entry_handed_back_unchanged_is_named_once() -> None:
    split = _entry(ProcessPart(pid=10, count=3))
    names = Names({10: 0})
    named: dict[int, tuple[ProbeEntry, ProbeEntry]] = {}
    first = with_ranks(Snapshot(t=1.0, host="n1", probes=(split,)), names, named)
    again = with_ranks(Snapshot(t=2.0, host="n1", probes=(split,)), names, named)
    assert again.probes[0] is first.probes[0] and names.asked == [10]
