"""A function profiled while a uretprobe sits on it: the probe puts the kernel's
trampoline where its caller's return address was, and the unwinder once stopped there
(`leaf;[uprobes];[unknown]`). The kernel's pending returns put the callers back."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.bpf_objects import none_left
from tests.support.cli import CLI
from tests.support.marks import requires_root
from tests.support.paths import TARGETS
from tests.support.workload import build_c
from tests.system.ebpf.test_profile import HZ, _export

_UNDER = tuple(
    f";main;{f}[uprobes]" for f in ("", "outer_a;", "outer_b;", "outer_a;leaf;", "outer_b;leaf;")
)


@pytest.mark.ebpf
@requires_root
def test_callers_are_kept_under_a_functions_own_uretprobe(tmp_path: Path) -> None:
    target = build_c(TARGETS / "profiled.c", tmp_path, "-O2", "-fomit-frame-pointer", "-pthread")
    rec = tmp_path / "rec.jsonl"
    # Two probes on one stack (outer_a calls leaf): two returns pending at once.
    proc = subprocess.run(
        [*CLI, "record", "--profile-hz", str(HZ), "--interval", "1", "--out", str(rec),
         "--probe", f"uprobe:{target.name}:leaf", "--probe", f"uprobe:{target.name}:outer_a",
         "--", str(target), "4"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    stacks = _export(rec)
    in_leaf = {k: v for k, v in stacks.items() if k.endswith(";leaf")}
    called = sum(in_leaf.values())
    # Sampled at about the rate asked, over the CPU time the leaf had (what the target
    # measured of itself: a loaded node gives it less than the run's 4 s).
    truth = json.loads(proc.stdout.strip().splitlines()[-1])
    assert called >= 0.5 * HZ * (truth["outer_a"] + truth["outer_b"]) and called >= 50, stacks
    with_callers = sum(
        v for k, v in in_leaf.items() if k.endswith((";main;outer_a;leaf", ";main;outer_b;leaf"))
    )
    assert with_callers >= 0.99 * called, in_leaf
    # Both callers were seen, with outer_a's share the larger (3 units to 1).
    a = sum(v for k, v in in_leaf.items() if k.endswith(";outer_a;leaf"))
    assert with_callers - a > 0 and a > with_callers - a, in_leaf
    # The probes' own work (a step out of line, the return trampoline) is one frame
    # under the function it stands in, its callers kept; a sample in the trampoline
    # after the kernel let go of its return (5 of 42 seen) has nothing to find them by.
    # Only this test's probes' frames: the sleeper thread calls no function probed here,
    # and another tool's uprobe on what it calls (bpftrace on clock_nanosleep) is not ours.
    probes = {k: v for k, v in stacks.items() if "[uprobes]" in k and ";sleeper;" not in k}
    kept = sum(v for k, v in probes.items() if k.endswith(_UNDER))
    assert kept >= 0.75 * sum(probes.values()), probes
    assert none_left()
