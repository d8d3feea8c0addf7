"""The task API's USDT sites on 5-byte nops: every USDT reader still finds them, the
kernel turns a probe there into a call where it can (the site's bytes in the process say
so), the counts stay exact, and the site is a nop again once the probes are gone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.placement.task_api import PROBE_BINARY, TASK_SPEC
from tests.support.marks import requires_root
from tests.unit.collectors.probes.test_usdt_sites import sites

PAIRS = 5000


TASKS = f"""
import sys
from adaptyst_top.placement.task_api import task
sys.stdin.readline()
for i in range({PAIRS}):
    with task("t", "cpu", 1000):
        pass
print("done", flush=True)
sys.stdin.readline()
"""


def in_memory(pid: int, offset: int, path: Path = PROBE_BINARY) -> bytes:
    """The 5 bytes at file OFFSET of PATH (the extension), as process PID runs them."""
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[5] != str(path):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        map_offset = int(fields[2], 16)
        if map_offset <= offset < map_offset + (end - start):
            with open(f"/proc/{pid}/mem", "rb") as mem:
                mem.seek(start + offset - map_offset)
                return mem.read(5)
    raise AssertionError(f"{path} not mapped in {pid}")


@pytest.mark.ebpf
@requires_root
def test_a_probe_on_them_becomes_a_call_counts_exactly_and_leaves_a_nop() -> None:
    from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine

    offsets = sites()
    optimizes = ov.kernel_optimizes_uprobes()
    child = subprocess.Popen(
        [sys.executable, "-c", TASKS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        with ProbeEngine(pid=child.pid) as engine:
            group = engine.add(TASK_SPEC)
            assert engine.wait(120) and group.state == "attached", group.error
            (row,) = group.rows
            assert row.cost_class == (ov.USDT_PAIR_OPTIMIZED if optimizes else ov.USDT_PAIR)
            child.stdin.write("go\n")
            child.stdin.flush()
            assert child.stdout.readline() == "done\n"
            engine.read()
            (entry,) = engine.snapshot_rows(False)
            assert entry.count == PAIRS and entry.cost_class == row.cost_class
            # Hit: a call into the kernel's trampoline where it optimizes, else the trap.
            first = {name: in_memory(child.pid, off)[0] for name, off in offsets.items()}
            assert first == dict.fromkeys(offsets, 0xE8 if optimizes else 0xCC), first
        # The probes gone: the sites are the nops they were.
        assert {name: in_memory(child.pid, off) for name, off in offsets.items()} == dict.fromkeys(
            offsets, ov.NOP5
        )
    finally:
        child.kill()
        child.wait()
