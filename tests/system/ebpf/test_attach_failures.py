"""An attach that fails leaves nothing behind: where the kernel's uprobe PMU refused a
process that had exited, libbcc fell back to a tracefs event, made it, failed to open it
for that process and left it in uprobe_events for good (found through the agent: one
event per PoCL linker child that exited while joining an opencl: session). libbpf
attaches now (its own fallback names events `libbpf_PID_...`); the same must hold."""

from __future__ import annotations

import subprocess

import pytest

from adaptyst_top.collectors.probes.bpf.module_object import load_module
from adaptyst_top.collectors.probes.bpf.program import Slot
from adaptyst_top.collectors.probes.elf.elf_info import read_elf
from adaptyst_top.system.targets import resolve_target
from tests.support.bpf_objects import uprobe_event_lines
from tests.support.marks import requires_root

pytestmark = requires_root


def test_an_attach_to_a_process_gone_leaves_no_event() -> None:
    libc = resolve_target("c")
    elf = read_elf(libc)
    symbol = next(s for s in elf.functions if s.name == "getpid")
    offset = elf.offset_of(symbol.address)
    assert offset is not None
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its PID names no process
    obj = load_module("uprobe.bpf.o", [Slot(0, "uprobe-entry")], False, None, None)
    try:
        before = uprobe_event_lines()
        with pytest.raises(OSError):
            obj.attach_uprobe("at_entry", libc, offset, gone.pid)
        with pytest.raises(OSError):
            obj.attach_uprobe("at_return", libc, offset, gone.pid, ret=True)
        assert uprobe_event_lines() == before
    finally:
        obj.cleanup()
