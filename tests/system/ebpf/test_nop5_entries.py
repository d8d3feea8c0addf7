"""Function entries on a 5-byte nop (gcc -pg -mfentry -mnop-mcount, and behind an endbr64
with -fcf-protection): classified `uprobe-optimized` where the kernel turns a probe there
into a call, probed on the nop (past the endbr64), shown by `list`; counts stay exact with
several threads calling at the highest rate, and the nop is back once the probes go."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.elf.elf_info import read_elf
from tests.support.marks import requires_root
from tests.support.workload import Workload
from tests.system.ebpf.test_usdt_sites import in_memory

THREADS, CALLS = 2, 400_000


@pytest.mark.ebpf
@requires_root
def test_threads_at_full_rate_count_exactly_through_the_call(workload_bin: Path) -> None:
    from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine

    optimizes = ov.kernel_optimizes_uprobes()
    w = Workload(workload_bin)
    sym = {f.name: f for f in read_elf(workload_bin).functions}["nop5_entry"]
    assert sym.file_offset is not None
    try:
        with ProbeEngine(pid=w.pid) as engine:
            group = engine.add(f"uprobe:{workload_bin}:nop5_entry")
            assert engine.wait(120) and group.state == "attached", group.error
            (row,) = group.rows
            assert row.cost_class == (ov.UPROBE_OPTIMIZED if optimizes else ov.EMULATED)
            for _ in range(3):
                w.run(f"threads {THREADS} {CALLS} nop5_entry")
            engine.read()
            (entry,) = engine.snapshot_rows(False)
            assert entry.count == 3 * THREADS * CALLS
            assert entry.error in (None, ""), entry.error
            first = in_memory(w.pid, sym.file_offset, workload_bin)[0]
            assert first == (0xE8 if optimizes else 0xCC)
        assert in_memory(w.pid, sym.file_offset, workload_bin) == ov.NOP5
    finally:
        w.kill()
