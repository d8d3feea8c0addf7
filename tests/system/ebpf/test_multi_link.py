"""Multi-uprobe links (kernel >= 6.6) against real targets, with real eBPF (root): every
libc function attached at once with exact counts, links swapped under a running target
without a call counted twice or lost, and an offset the kernel refuses kept from taking
the others down."""

from __future__ import annotations

import os
import threading

import pytest

from adaptyst_top.collectors.probes.elf.elf_info import read_elf
from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
from adaptyst_top.collectors.probes.engine.uprobe_multi import kernel_has_multi, link_split
from adaptyst_top.system.targets import resolve_target
from tests.support.bpf_objects import none_left, our_programs, uprobe_event_lines
from tests.support.marks import requires_root
from tests.support.workload import Workload

pytestmark = [pytest.mark.ebpf, requires_root]


@pytest.fixture(autouse=True)
def nothing_left_behind():  # type: ignore[no-untyped-def]
    assert kernel_has_multi(), "this kernel has multi-uprobe links (>= 6.6): they must be tested"
    yield
    assert none_left(), our_programs()
    assert not uprobe_event_lines()


def counts(engine: ProbeEngine) -> dict[str, int]:
    engine.read()
    return {r.name: r.count for r in engine.snapshot_rows() if r.key is None}


def test_every_libc_function_attached_with_exact_counts(workload: Workload) -> None:
    with ProbeEngine(pid=workload.pid, max_attach=5000) as engine:
        group = engine.add("uprobe:c:*")
        assert engine.wait(120) and group.state == "attached", group.error
        live = [r for r in group.rows if r.state == "attached"]
        assert len(live) > 1500, len(live)  # libc's ~2,000 functions, less the refused
        assert len({r.module.multi for r in live if r.module}) == 1  # one module, its links
        refused = [r for r in group.rows if r.state == "error"]
        assert all(r.error for r in refused)  # each says why (AVX-512 entries, x87...)
        workload.run("ppid 1000")
        workload.run("fast 10")  # libc is not involved: nothing counted for it
        workload.run("ppid 234")
        assert counts(engine)["getppid"] == 1234


def test_links_swapped_under_a_running_target_count_each_call_once(workload: Workload) -> None:
    """Switching a row off or on swaps the module's links: the new ones go on before the old
    ones come off, so the functions in both see a call twice meanwhile; it counts once."""
    with ProbeEngine(pid=workload.pid) as engine:
        group = engine.add(f"uprobe:{workload.binary}:*_fn")
        assert engine.wait(60) and group.state == "attached", group.error
        by_name = {r.name: r for r in group.rows}
        assert by_name["fast_fn"].module is not None and by_name["fast_fn"].module.multi
        other = by_name["other_fn"]
        done = threading.Event()
        calls = [0]

        def run() -> None:  # calls all the time the links are swapped
            while not done.is_set():
                workload.run("fast 20000")
                calls[0] += 20000

        runner = threading.Thread(target=run)
        runner.start()
        try:
            for swap in range(12):
                engine.set_enabled(other.id, swap % 2 == 1)  # off, on, off...
                assert engine.flush()
        finally:
            done.set()
            runner.join()
        engine.set_enabled(other.id, True)
        workload.run("held 20 1000")  # a nested pair (held_ss is not called)
        c = counts(engine)
        assert c["fast_fn"] == calls[0]
        assert c["held_fn"] == 20


def test_an_offset_the_kernel_refuses_does_not_take_the_others_down() -> None:
    """pthread_spin_lock starts with a LOCK-prefixed instruction, which the kernel's
    uprobe decoder rejects (planning refuses it first; the link is the last line)."""
    from adaptyst_top.collectors.probes.bpf.module_object import load_module
    from adaptyst_top.collectors.probes.bpf.program import MULTI_ENTRY, Slot

    libc = resolve_target("c", os.getpid())
    elf = read_elf(libc)
    offsets = {s.name: s.file_offset for s in elf.functions if s.file_offset is not None}
    wanted = {0: offsets["getppid"], 1: offsets["pthread_spin_lock"], 2: offsets["getpid"]}
    slots = [Slot(i, "uprobe-entry") for i in range(3)]
    bpf = load_module("uprobe.bpf.o", slots, True, None, None)
    try:
        fd = bpf.funcs[MULTI_ENTRY].fd
        refused: dict[int, str] = {}
        links = link_split(fd, libc, wanted, False, os.getpid(), refused)
        try:
            assert list(refused) == [1] and "refused" in refused[1]
            assert 1 <= len(links) <= 2  # the two good offsets still attached
        finally:
            for link in links:
                os.close(link)
    finally:
        bpf.cleanup()
