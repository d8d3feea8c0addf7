"""What the monitor gives back after bcc's compiler ran: only pages that are the
file's own are dropped, and a probe compiled after the drop counts exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.engine import ProbeEngine
from adaptyst_top.system.heap import clean_ranges
from tests.support.marks import requires_root
from tests.support.workload import Workload


def _compiler_resident_kib() -> int:
    """Resident KiB of what drop_clean_pages drops: the compiler's clean read-only
    mappings (a relocated one holds pages of its own and stays as it is)."""
    lines = Path("/proc/self/smaps").read_text().splitlines(True)
    clean = set(clean_ranges(lines, ("libLLVM", "libclang")))
    total, current = 0, None
    for line in lines:
        head = line.split()
        if head and "-" in head[0] and not head[0].endswith(":"):
            start, end = (int(x, 16) for x in head[0].split("-"))
            current = (start, end) in clean
        elif current and head[0] == "Rss:":
            total += int(head[1])
    return total


@requires_root
@pytest.mark.ebpf
def test_a_compile_leaves_the_compiler_unresident_and_the_next_compile_works(
    workload: Workload,
) -> None:
    with ProbeEngine(pid=workload.pid) as engine:
        for spec in (f"uprobe:{workload.binary}:fast_fn", f"uprobe:{workload.binary}:other_fn"):
            group = engine.add(spec)
            assert engine.wait(120) and group.state == "attached", group.error
            # ~80 MiB of LLVM's and clang's code was resident after a compile; dropped,
            # it is what ran since (little or nothing).
            assert _compiler_resident_kib() < 4 * 1024
        workload.run("fast 300")
        workload.run("other 200")
        engine.read()
        counts = {r.name: r.count for r in engine.snapshot_rows()}
        assert counts == {"fast_fn": 300, "other_fn": 200}
