"""A job's nodes' snapshots merged: one row per function over every node, each process's
share named by node and rank, the imbalance over the whole job."""

from __future__ import annotations

from adaptyst_top.runtime.job_merge import merge_nodes
from adaptyst_top.snapshot import (
    DeviceReading,
    Latency,
    NodeState,
    ProbeEntry,
    ProbeTarget,
    ProcessPart,
    Snapshot,
)


def _entry(group: int, *parts: ProcessPart, hist: tuple[tuple[int, int], ...] = ()) -> ProbeEntry:
    count = sum(p.count for p in parts)
    total = sum(p.total_ns or 0 for p in parts)
    return ProbeEntry(
        group=group,
        id=group * 10,
        spec="uprobe:/x/app:compute",
        name="compute",
        kind="uprobe",
        state="attached",
        count=count,
        rate_hz=float(count),
        latency=Latency(mean_ns=total / count, min_ns=1.0, max_ns=9e9),
        raw=Latency(mean_ns=total / count, min_ns=1.0, max_ns=9e9),
        hist=hist,
        parts=parts,
    )


def _node(name: str, entry: ProbeEntry, ended: bool = False) -> Snapshot:
    cpu = DeviceReading(id="cpu", kind="cpu", name="EPYC", util=0.5)
    return Snapshot(
        t=3.0,
        host=name,
        probes=(entry,),
        devices=(cpu,),
        target=ProbeTarget("job 7", tuple(p.pid for p in entry.parts)),
        target_ended=ended,
        warnings=("a word",),
    )


def test_rows_merge_over_nodes_with_each_rank_and_the_jobs_imbalance() -> None:
    # Both nodes number their pids alike: a part is its node's.
    a = _entry(
        0,
        ProcessPart(pid=100, count=10, total_ns=100.0),
        ProcessPart(pid=101, count=10, total_ns=100.0),
        hist=((5, 20),),
    )
    b = _entry(
        3,
        ProcessPart(pid=100, count=10, total_ns=400.0),
        ProcessPart(pid=101, count=10, total_ns=200.0),
        hist=((5, 10), (6, 10)),
    )
    states = [NodeState("n1", "ok", None, 0.1), NodeState("n2", "ok", None, 0.2)]
    ranks = {"n1": {100: 0, 101: 1}, "n2": {100: 2, 101: 3}}
    snap = merge_nodes(
        5.0, "login", "7", {"n1": _node("n1", a), "n2": _node("n2", b)}, states, ranks
    )
    (row,) = snap.probes
    assert (row.count, row.rate_hz, row.group, row.id) == (40, 40.0, 0, 0)
    assert row.hist == ((5, 30), (6, 10))
    assert row.mean_ns == 20.0  # (200 + 600) / 40
    assert [(p.node, p.pid, p.rank) for p in row.parts] == [
        ("n2", 100, 2),
        ("n2", 101, 3),
        ("n1", 100, 0),
        ("n1", 101, 1),
    ]
    assert row.imbalance == 2.0 and row.imbalance_pid == 100  # 400 over the mean of 200
    assert [d.id for d in snap.devices] == ["n1/cpu", "n2/cpu"]
    assert snap.devices[0].name == "n1: EPYC"
    assert snap.warnings == ("n1: a word", "n2: a word")
    assert snap.nodes == tuple(states) and snap.host == "login" and snap.t == 5.0
    assert snap.target is not None and snap.target.name == "job 7 on 2 nodes"
    assert not snap.target_ended


def test_the_job_ends_when_every_node_that_answered_says_so() -> None:
    a = _entry(0, ProcessPart(pid=1, count=1, total_ns=1.0))
    states = [NodeState("n1", "ok"), NodeState("n2", "unreachable", "ssh: refused")]
    ended = merge_nodes(1.0, "login", "7", {"n1": _node("n1", a, ended=True)}, states)
    assert ended.target_ended and ended.nodes[1].reason == "ssh: refused"
    # No node answered yet: nothing has ended.
    assert not merge_nodes(1.0, "login", "7", {}, states).target_ended


def test_a_rank_told_on_the_node_is_kept() -> None:
    a = _entry(0, ProcessPart(pid=1, rank=5, count=1, total_ns=1.0))
    snap = merge_nodes(1.0, "l", "7", {"n1": _node("n1", a)}, [], {"n1": {1: 9}})
    assert snap.probes[0].parts[0].rank == 5


def test_profiles_sum_and_each_fresh_stack_keeps_its_node_and_rank() -> None:
    from dataclasses import replace

    from adaptyst_top.snapshot import ProfileFunction, ProfilePart, ProfileStack

    def profiled(node: str) -> Snapshot:
        part = ProfilePart(
            hz=99,
            samples=10,
            functions=(ProfileFunction("compute", "/x/app", self_samples=8, total=10),),
            stacks=(ProfileStack(pid=100, tid=100, frames=("main", "compute"), samples=10),),
        )
        return replace(
            _node(node, _entry(0, ProcessPart(pid=100, count=1, total_ns=1.0))), profile=part
        )

    snaps = {"n1": profiled("n1"), "n2": profiled("n2")}
    snap = merge_nodes(1.0, "l", "7", snaps, [], {"n1": {100: 0}}, fresh={"n1"})
    assert snap.profile is not None
    assert snap.profile.samples == 20 and snap.profile.functions[0].total == 20
    # n2's latest was merged before: its interval's stacks are not counted twice.
    assert [s.frames for s in snap.profile.stacks] == [("n1", "rank 0", "main", "compute")]
    both = merge_nodes(1.0, "l", "7", snaps, [], {})
    heads = [s.frames[:2] for s in both.profile.stacks]  # type: ignore[union-attr]
    assert heads == [("n1", "pid 100"), ("n2", "pid 100")]


def test_a_relays_merge_merged_again_is_the_same_view_as_every_node_at_once() -> None:
    from dataclasses import replace

    from adaptyst_top.snapshot import ProfileFunction, ProfilePart, ProfileStack

    def node(name: str, pid: int, ns: float) -> Snapshot:
        part = ProfilePart(
            hz=99,
            samples=4,
            functions=(ProfileFunction("compute", "/x/app", self_samples=4, total=4),),
            stacks=(ProfileStack(pid=pid, tid=pid, frames=("main", "compute"), samples=4),),
        )
        entry = _entry(0, ProcessPart(pid=pid, count=10, total_ns=ns), hist=((5, 10),))
        return replace(_node(name, entry), profile=part)

    snaps = {"n1": node("n1", 100, 100.0), "n2": node("n2", 100, 300.0), "n3": node("n3", 7, 200.0)}
    ranks = {"n1": {100: 0}, "n2": {100: 1}, "n3": {7: 2}}
    states = [NodeState(n, "ok", None, 0.1) for n in snaps]
    direct = merge_nodes(2.0, "login", "7", snaps, states, ranks)
    relay = merge_nodes(1.0, "n1", "7", {k: snaps[k] for k in ("n1", "n2")}, states[:2], ranks)
    relay = Snapshot.from_json(relay.to_json())  # as the relay's answer carries it
    # The login node asks ranks of the nodes it reaches directly alone (a relay names its).
    told = {"n3": ranks["n3"], "n1": {100: 99}}
    tree = merge_nodes(
        2.0, "login", "7", {"n1": relay, "n3": snaps["n3"]}, states, told, relayed={"n1"}
    )
    (a,), (b,) = direct.probes, tree.probes
    assert (a.count, a.hist, a.mean_ns) == (b.count, b.hist, b.mean_ns) == (30, ((5, 30),), 20.0)
    assert {(p.node, p.pid, p.rank) for p in a.parts} == {(p.node, p.pid, p.rank) for p in b.parts}
    assert (a.imbalance, a.imbalance_pid) == (b.imbalance, b.imbalance_pid) == (1.5, 100)
    assert [d.name for d in tree.devices] == [d.name for d in direct.devices]
    assert tree.warnings == direct.warnings == ("n1: a word", "n2: a word", "n3: a word")
    stacks = [s.frames for s in tree.profile.stacks]  # type: ignore[union-attr]
    assert sorted(stacks) == sorted(s.frames for s in direct.profile.stacks)  # type: ignore[union-attr]
    assert ("n2", "rank 1", "main", "compute") in stacks
