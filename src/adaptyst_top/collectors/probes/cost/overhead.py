"""What probes cost: attach-point classes, their calibrated per-hit cost, BPF run time.

On x86-64 the kernel emulates a few first instructions of a uprobed function (push,
nop, jumps and calls) and must single-step every other one out of line, which costs
about 14x more here. Each attach point is classified from its first bytes; each
class is calibrated on this machine at start-up (see calibration.py).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable

from adaptyst_top.collectors.probes.bpf.stats import enable_run_time_stats

# What a session allows by default: the probes' share of the target's CPU, and how many
# attach points one spec may match.
DEFAULT_BUDGET = 0.02
DEFAULT_MAX_ATTACH = 1000

USDT = "usdt"
EMULATED = "uprobe-emulated"
SINGLESTEP = "uprobe-singlestep"
# A single-stepped entry whose interval starts at a second probe past it, on the first
# instruction the kernel emulates (entry_retime.py): two hits a call, an emulated one's
# cost inside the interval.
SINGLESTEP_RETIMED = "uprobe-singlestep-retimed"
USDT_PAIR = "usdt-pair"  # a begin..end pair: two hits per interval
# A USDT site on a 5-byte nop, where the kernel turns the probe into a call on its first
# hit (arch_uprobe_optimize, Linux 6.18 on x86-64) instead of trapping on every one.
USDT_OPTIMIZED = "usdt-optimized"
USDT_PAIR_OPTIMIZED = "usdt-pair-optimized"
# A function entry on a 5-byte nop (gcc -pg -mfentry -mnop-mcount): the same fast path.
UPROBE_OPTIMIZED = "uprobe-optimized"
UNKNOWN = "uprobe-unknown"
NOP5 = bytes.fromhex("0f1f440000")  # nopl 0x0(%rax,%rax,1): what the kernel optimizes
ENDBR64 = bytes.fromhex("f30f1efa")  # what -fcf-protection puts before it
PAGE = 4096  # the kernel patches a site only when its 5 bytes lie in one page


@functools.cache
def kernel_optimizes_uprobes(kallsyms: str = "/proc/kallsyms") -> bool:
    """Whether this kernel turns uprobes on 5-byte nops into calls (its symbol names are
    readable by anyone; only their addresses are hidden)."""
    try:
        with open(kallsyms) as f:
            return any(line.endswith(" arch_uprobe_optimize\n") for line in f)
    except OSError:
        return False


def optimizable(code: bytes, offset: int | None, machine: str = "x86_64") -> bool:
    """Whether a uprobe at file OFFSET, on CODE, becomes a call on this kernel (a file
    offset and its address agree modulo the page size)."""
    return (
        machine in ("x86_64", "EM_X86_64")
        and code[:5] == NOP5
        and offset is not None
        and offset % PAGE <= PAGE - len(NOP5)
        and kernel_optimizes_uprobes()
    )


def entry_skip(code: bytes, offset: int | None, machine: str = "x86_64") -> int:
    """Bytes to step over at a function's entry to reach a 5-byte nop the kernel optimizes:
    4 past an endbr64 (it changes no register and no stack, so an entry and return probe
    there see what they would see at the symbol), else 0."""
    if code[:4] == ENDBR64 and offset is not None and optimizable(code[4:], offset + 4, machine):
        return 4
    return 0


def usdt_class(sites: list[tuple[bytes, int | None]], pair: bool, machine: str = "x86_64") -> str:
    """A USDT row's cost class from each of its sites: (bytes there, file offset)."""
    optimized = bool(sites) and all(optimizable(c, off, machine) for c, off in sites)
    if pair:
        return USDT_PAIR_OPTIMIZED if optimized else USDT_PAIR
    return USDT_OPTIMIZED if optimized else USDT


def classify_entry(code: bytes, machine: str = "x86_64", offset: int | None = None) -> str:
    """The uprobe class of a function from its first instruction bytes (at file OFFSET,
    where known: a 5-byte nop there may be optimized)."""
    if machine not in ("x86_64", "EM_X86_64") or not code:
        return UNKNOWN
    if optimizable(code, offset, machine):
        return UPROBE_OPTIMIZED
    b0 = code[0]
    if 0x50 <= b0 <= 0x57:  # push %reg
        return EMULATED
    if b0 == 0x41 and len(code) > 1 and 0x50 <= code[1] <= 0x57:  # push %r8..%r15
        return EMULATED
    # The one-byte nop only: a multi-byte nopl (0f 1f) the kernel does not optimize is
    # single-stepped (6.18: a 4-byte one cost 11.7 us inside the interval here, not 0.7).
    if b0 == 0x90:
        return EMULATED
    if b0 in (0xE8, 0xE9, 0xEB) or 0x70 <= b0 <= 0x7F:  # call, jmp, jcc rel8
        return EMULATED
    # endbr64 (f3 0f 1e fa), lea, mov, sub, ...: single-stepped (measured here too).
    return SINGLESTEP


class BpfStats:
    """BPF run-time statistics, sampled: on for one interval in every `period`.

    While on, the kernel times every BPF program on the machine (two clock reads per
    run, ~80 ns here, ours and everybody else's), so it is left on only for a sample;
    run_time_ns/run_cnt stays a true mean over the sampled runs. It is switched on by
    holding a BPF_ENABLE_STATS descriptor, never by writing kernel.bpf_stats_enabled:
    the kernel counts the holders and drops ours when this process ends, however it
    ends, and another monitor's sampling is never undone by ours.
    """

    def __init__(self, period: int = 10, enable: Callable[[], int] | None = None) -> None:
        self.period = max(1, period)
        self.ticks = 0
        self.fd: int | None = None
        self._enable = enable or enable_run_time_stats
        self._ok: bool | None = None

    def available(self) -> bool:
        if self._ok is None:
            try:
                os.close(self._enable())
                self._ok = True
            except OSError:
                self._ok = False
        return self._ok

    def tick(self) -> None:
        """Once per read: switch on at the start of each period, off one tick later."""
        if not self.available():
            return
        phase = self.ticks % self.period
        self.ticks += 1
        if phase == 0 and self.fd is None:
            with contextlib.suppress(OSError):
                self.fd = self._enable()
        elif phase == 1:
            self.restore()

    @property
    def sampling(self) -> bool:
        """Whether this process holds the statistics on right now."""
        return self.fd is not None

    def window_closed(self) -> bool:
        """True in the interval just after a sampling window ended."""
        return self.ticks % self.period == 2 % self.period

    def restore(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


def prog_run_stats(fd: int) -> tuple[int, int]:
    """(run_time_ns, run_cnt) of a loaded BPF program, from its fdinfo."""
    run_ns = run_cnt = 0
    try:
        with open(f"/proc/self/fdinfo/{fd}") as f:
            for line in f:
                if line.startswith("run_time_ns:"):
                    run_ns = int(line.split()[1])
                elif line.startswith("run_cnt:"):
                    run_cnt = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return run_ns, run_cnt
