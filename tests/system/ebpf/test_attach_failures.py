"""An attach that fails leaves nothing behind: where the kernel's uprobe PMU refused a
process that had exited, libbcc fell back to a tracefs event, made it, failed to open it
for that process and left it in uprobe_events for good (found through the agent: one
event per PoCL linker child that exited while joining an opencl: session)."""

from __future__ import annotations

import os
import subprocess

import pytest
from bcc import BPF  # type: ignore[import-not-found]

from adaptyst_top.collectors.probes.bcc_extras import attach_at_offset, attach_with_semaphore
from adaptyst_top.collectors.probes.elf_info import read_elf
from adaptyst_top.system.targets import resolve_target
from tests.support.marks import requires_root

pytestmark = requires_root


def events_of_this_process() -> list[str]:
    with open("/sys/kernel/tracing/uprobe_events") as f:
        return [line for line in f if f"_bcc_{os.getpid()} " in line + " "]


def test_an_attach_to_a_process_gone_leaves_no_event() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its PID names no process
    libc = resolve_target("c")
    elf = read_elf(libc)
    symbol = next(s for s in elf.functions if s.name == "getpid")
    offset = elf.offset_of(symbol.address)
    assert offset is not None
    bpf = BPF(text="int at_probe(struct pt_regs *ctx) { return 0; }")
    try:
        before = events_of_this_process()
        with pytest.raises(OSError):
            attach_at_offset(bpf, libc, offset, "at_probe", gone.pid, False, 0)
        with pytest.raises(OSError):
            attach_with_semaphore(bpf, libc, symbol.address, "at_probe", gone.pid, 0)
        assert events_of_this_process() == before
    finally:
        bpf.cleanup()
