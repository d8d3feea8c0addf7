"""Joules per probe row: on-CPU time measured in the kernel, the CPU's energy split over
the node's busy time, never more than the device measured."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import pytest

from adaptyst_top.collectors.energy.probes import ProbeEnergy
from adaptyst_top.snapshot import DeviceReading, ProbeEntry
from tests.support.spin import spin

# --- the split alone ---------------------------------------------------------------------


def _entry(row: int, cpu_ns: int | None) -> ProbeEntry:
    return ProbeEntry(
        group=row, id=row, spec=f"s{row}", name=f"f{row}", kind="uprobe", cpu_ns=cpu_ns
    )


def _cpu(joules: float | None, source: str = "rapl") -> DeviceReading:
    return DeviceReading(id="cpu", kind="cpu", name="cpu", energy_j=joules, energy_source=source)


def test_rows_never_add_up_to_more_than_the_cpu_measured() -> None:
    rng = random.Random(7)
    busy = [0]
    split = ProbeEnergy(busy_ns=lambda: busy[0])
    cpu_ns = [0] * 5
    joules = 0.0
    snap_entries: list[ProbeEntry] = []
    for tick in range(200):
        busy[0] += rng.randrange(0, 2_000_000_000)
        for i in range(len(cpu_ns)):
            cpu_ns[i] += rng.randrange(0, 1_500_000_000)  # rows overlapping: more than busy
        if tick % 3 == 0:  # the device is read less often than the probes
            joules += rng.uniform(0, 100)
        snap_entries, splits = split.attribute(
            [_entry(i, n) for i, n in enumerate(cpu_ns)], [_cpu(joules)]
        )
        total = sum(e.energy_j or 0.0 for e in snap_entries)
        if not splits:
            assert tick < 4 and total == 0  # nothing split before a second reading
            continue
        (s,) = splits
        assert total <= s.measured_j + 1e-6 and s.measured_j <= joules + 1e-6
        assert s.unattributed_j == pytest.approx(s.measured_j - s.attributed_j, abs=1e-6)
    assert all(e.energy_method == "rapl-oncpu" for e in snap_entries)


def test_time_waits_for_the_next_energy_reading_and_idle_rows_keep_their_entries() -> None:
    busy = [0]
    split = ProbeEnergy(busy_ns=lambda: busy[0])
    split.attribute([_entry(0, 0), _entry(1, None)], [_cpu(5.0)])
    busy[0] = 4_000_000_000
    rows, _ = split.attribute([_entry(0, 1_000_000_000), _entry(1, None)], [_cpu(5.0)])
    assert rows[0].energy_j is None  # no energy split yet: nothing to say
    busy[0] = 8_000_000_000
    idle = _entry(0, 2_000_000_000)
    rows, (s,) = split.attribute([idle, _entry(1, None)], [_cpu(25.0)])
    # 20 J over 8 s of busy CPU; the row was on a CPU 2 s of them.
    assert rows[0].energy_j == pytest.approx(5.0) and rows[1].energy_j is None
    assert s.measured_j == pytest.approx(20.0) and s.unattributed_j == pytest.approx(15.0)
    again, _ = split.attribute([idle, _entry(1, None)], [_cpu(25.0)])
    assert again[0] is rows[0]


def test_no_cpu_energy_leaves_rows_without_joules() -> None:
    split = ProbeEnergy(busy_ns=lambda: 1)
    for n in (0, 10, 20):
        rows, splits = split.attribute([_entry(0, n)], [_cpu(None)])
        assert rows[0].energy_j is None and rows[0].energy_method is None and splits == ()


class _Scope:
    """A session's processes' CPU time, as ScopeCpu gives it: what ran since last asked."""

    def __init__(self) -> None:
        self.ns = 0

    def delta_ns(self) -> int:
        ns, self.ns = self.ns, 0
        return ns

    def holds(self, pid: int) -> bool:
        return True


def test_two_users_nested_rows_never_claim_more_than_their_processes_ran() -> None:
    """Each session nests two probes (a function and its callee: each row counts the
    same second); the node was busy 4 s, each user's processes 1 s of it. Without the
    bound each session took 2 s of the 4 (half the CPU's energy each, with idle others
    nothing left); with it, each its 1 s: a quarter."""
    busy = [0]
    sessions = []
    for _ in range(2):
        scope = _Scope()
        sessions.append((ProbeEnergy(busy_ns=lambda: busy[0], scope=scope), scope))  # type: ignore[arg-type]
    for split, _ in sessions:
        split.attribute([_entry(0, 0), _entry(1, 0)], [_cpu(0.0)])
    busy[0] = 4_000_000_000
    claimed = 0.0
    for split, scope in sessions:
        scope.ns = 1_000_000_000
        rows, (s,) = split.attribute(
            [_entry(0, 1_000_000_000), _entry(1, 1_000_000_000)], [_cpu(40.0)]
        )
        assert [r.energy_j for r in rows] == [pytest.approx(5.0), pytest.approx(5.0)]
        assert s.attributed_j == pytest.approx(10.0)
        claimed += s.attributed_j
    assert claimed <= 40.0 / 2 + 1e-9  # the users' 2 s of the node's 4


def test_a_sessions_processes_cpu_time_is_what_they_ran_since_last_asked() -> None:
    from adaptyst_top.collectors.energy.scope_cpu import TICK_NS, ScopeCpu

    spinner = spin([sys.executable, "-c", "while True: pass"])
    napper = subprocess.Popen(
        [sys.executable, "-c", "import time; print(flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
    )
    try:
        # The napper's start-up (imports, coverage's hook) is CPU time: wait it out.
        assert napper.stdout is not None and napper.stdout.readline() == b"\n"
        by_pid = ScopeCpu(pids=lambda: [spinner.pid, 999_999_999])
        by_uid = ScopeCpu(uid=os.getuid())
        asleep = ScopeCpu(pids=lambda: [napper.pid])
        nobody = ScopeCpu(uid=os.getuid() + 12345)
        scopes = (by_pid, by_uid, asleep, nobody)
        assert [s.delta_ns() for s in scopes] == [0, 0, 0, 0]  # first seen: from now
        start = time.monotonic()
        time.sleep(0.5)
        spun, mine, napped, none = (s.delta_ns() for s in scopes)
        wall = time.monotonic() - start
        assert 2 * TICK_NS < spun <= wall * 1e9 + 2 * TICK_NS  # a core at most, to the tick
        assert mine >= spun - TICK_NS  # the user's processes: the spinner among them
        assert napped <= 2 * TICK_NS and none == 0
    finally:
        for p in (spinner, napper):
            p.kill()
            p.wait()
        if napper.stdout is not None:
            napper.stdout.close()
