"""A call's on-CPU time, measured in the kernel (`run_read()` in bpf/module.h).

Each CPU's task clock leaves out that CPU's own IRQ and steal time, so the offsets
cancel only when entry and return run on one CPU; across CPUs the run time's growth
alone is taken (off by less than a tick on each side).

A running thread's CPU time is `se.sum_exec_runtime` plus the time since `se.exec_start`
(the scheduler brings both up to date together at each tick and switch). So
`sum_exec_runtime - exec_start` read at entry and at return, with the wall time between
them, gives the call's time on a CPU: the two clocks' offsets cancel, and a sleep shows
as `exec_start` moving on while the sum stays. One 16-byte read per entry and return
(the two fields sit side by side); the offsets come from the running kernel's BTF.
"""

from __future__ import annotations

from adaptyst_top.collectors.probes.bpf.kernel_btf import BTFError, member_offset


def oncpu_offset() -> int | None:
    """Where `se.exec_start` is in task_struct (`sum_exec_runtime` right after it), or
    None when the kernel does not describe the fields (no BTF) or lays them out apart:
    then calls get no on-CPU time, and no energy."""
    try:
        se = member_offset("task_struct", "se")
        start = member_offset("sched_entity", "exec_start")
        total = member_offset("sched_entity", "sum_exec_runtime")
    except BTFError:
        return None
    return se + start if total == start + 8 else None
