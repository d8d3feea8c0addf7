"""A row counted per process (a job's ranks): the keys of processes that have exited
leave the kernel's maps (which a long job of many steps would fill), and what they
counted stays in the row, each one's share as it was; past what a module keeps, the
oldest fold into one share that is no process's, the row's figures whole. Real eBPF."""

from __future__ import annotations

import pytest

from adaptyst_top.collectors.probes.engine import exited
from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
from adaptyst_top.snapshot import ProbeEntry
from tests.support.marks import requires_root
from tests.support.workload import Workload
from tests.system.ebpf.test_follow import nothing_left_behind  # noqa: F401 - autouse

pytestmark = [pytest.mark.ebpf, requires_root]


def fast_row(engine: ProbeEngine) -> ProbeEntry:
    engine.read()
    (row,) = [e for e in engine.snapshot_rows() if e.name == "fast_fn"]
    return row


def test_exited_processes_leave_the_maps_and_keep_their_shares(
    workload: Workload, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ProbeEngine(pid=workload.pid, follow=True, by_process=True) as engine:
        group = engine.add(f"uprobe:{workload.binary}:fast_fn")
        assert engine.wait(120) and group.state == "attached", group.error
        workload.run("fast 10")
        workload.run("spawn 3 1000 100")  # three children, 100 calls each, waited for
        before = fast_row(engine)
        children = {p.pid: p.count for p in before.parts if p.pid != workload.pid}
        assert sorted(children.values()) == [100, 100, 100], before.parts
        (module,) = [m for m in engine.modules if m.by_process]
        in_kernel = {int(k.pid) for k, _ in module.reader("stats").items()}
        assert in_kernel == {workload.pid, *children}

        assert exited.retire_exited(module) == 3  # one kernel key each
        after = fast_row(engine)
        assert {int(k.pid) for k, _ in module.reader("stats").items()} == {workload.pid}
        assert len(module.exited) == 3
        # The row reads as it did: its figures, its histogram, each process's share.
        assert (after.count, after.hist, after.mean_ns) == (310, before.hist, before.mean_ns)
        assert sum(c for _, c in after.hist or ()) == 310
        assert {p.pid: p.count for p in after.parts} == {p.pid: p.count for p in before.parts}
        assert after.imbalance == before.imbalance

        # A live process goes on counting under its key; nothing of it was retired.
        workload.run("fast 5")
        assert exited.retire_exited(module) == 0
        assert fast_row(engine).count == 315

        # Past what a module keeps, the oldest fold into one share, no process's.
        monkeypatch.setattr(exited, "MAX_SHARES", 3)
        workload.run("spawn 2 1000 7")  # 14 calls, more than 1 s after the last read
        assert exited.retire_exited(module) == 2
        folded = fast_row(engine)
        assert folded.count == 315 + 14 and sum(c for _, c in folded.hist or ()) == 329
        # Three shares: the folded one (three children's 300 calls) and the two newest.
        assert len(module.exited) == 3 and len(module.exited_order) == 2
        shown = {p.pid: p.count for p in folded.parts}
        assert exited.FOLDED_PID not in shown and shown[workload.pid] == 15
        assert sorted(c for p, c in shown.items() if p != workload.pid) == [7, 7]
        # The interval's 14 calls, not the folded 300 again: at most 14 a second.
        assert folded.rate_hz is not None and 0 < folded.rate_hz <= 14, folded.rate_hz
        assert module.exited_buckets == sum(map(len, module.exited_hist.values()))

        # No room even folded (every share folded, the next would not fit): the keys
        # stay in the kernel's maps, the row whole.
        monkeypatch.setattr(exited, "MAX_SHARES", 1)
        workload.run("spawn 1 1000 3")
        assert exited.retire_exited(module) == 0
        assert fast_row(engine).count == 332
