"""Joules per probe row: on-CPU time measured in the kernel, the CPU's energy split over
the node's busy time, never more than the device measured."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptyst_top.collectors.devices.cpu import PowerModel
from adaptyst_top.collectors.devices.sweep import DeviceSweep
from adaptyst_top.collectors.hub import Hub
from adaptyst_top.collectors.probe_energy import ProbeEnergy
from adaptyst_top.collectors.probes.engine import ProbeEngine
from adaptyst_top.snapshot import DeviceReading, ProbeEntry, Snapshot

from .conftest import requires_root
from .workload import Workload

CLI = [sys.executable, "-m", "adaptyst_top.cli.start"]
CALL_US = 20_000  # a spinning and a sleeping call of the same latency, side by side


class FakeRapl:
    """A powercap tree (sysfs names and units: µJ, max_energy_range_uj) whose package
    counter a thread advances at WATTS, wrapping at RANGE_UJ as RAPL's does."""

    RANGE_UJ = 40_000_000  # 40 J: wraps about every second at 35 W

    def __init__(self, root: Path, watts: float) -> None:
        self.zone = root / "class/powercap/intel-rapl:0"
        self.zone.mkdir(parents=True)
        (self.zone / "name").write_text("package-0\n")
        (self.zone / "max_energy_range_uj").write_text(f"{self.RANGE_UJ}\n")
        self.watts = watts
        self.total_uj = 0.0
        self._stop = threading.Event()
        self._write(0)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _write(self, uj: float) -> None:
        tmp = self.zone / "energy_uj.new"
        tmp.write_text(f"{int(uj) % self.RANGE_UJ}\n")
        tmp.rename(self.zone / "energy_uj")

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(0.05):
            now = time.monotonic()
            self.total_uj += self.watts * (now - last) * 1e6
            last = now
            self._write(self.total_uj)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def fake_rapl(tmp_path: Path) -> Iterator[FakeRapl]:
    rapl = FakeRapl(tmp_path / "sys", watts=35.0)
    yield rapl
    rapl.close()


def _spin_and_nap(workload: Workload, sweep: DeviceSweep) -> Snapshot:
    """Snapshots while the two functions run side by side; the last one after them."""
    with ProbeEngine(pid=workload.pid) as engine:
        hub = Hub(engine, sweep)
        for fn in ("held_fn", "napped_fn"):
            group = engine.add(f"uprobe:{workload.binary}:{fn}")
            assert engine.wait(120) and group.state == "attached", group.error
        hub.snapshot()
        done = threading.Event()
        runner = threading.Thread(
            target=lambda: (workload.run(f"heldnap 60 {CALL_US}"), done.set()), daemon=True
        )
        runner.start()
        snap = hub.snapshot()
        while not done.wait(0.3):
            snap = hub.snapshot()
        runner.join()
        time.sleep(sweep.period_s * 1.2)  # the last device reading after the calls
        snap = hub.snapshot()
        hub.close()
        return snap


def _check_split(snap: Snapshot, method: str, calls: int = 60) -> dict[str, ProbeEntry]:
    rows = {p.name: p for p in snap.probes}
    spin, nap = rows["held_fn"], rows["napped_fn"]
    assert spin.count == nap.count == calls
    # Equal latency, side by side; the spinning one is on a CPU, the sleeping one is not.
    assert spin.mean_ns is not None and nap.mean_ns is not None
    assert 0.8 < spin.mean_ns / nap.mean_ns < 1.25
    assert spin.cpu_ns is not None and nap.cpu_ns is not None
    assert spin.cpu_ns >= 0.9 * calls * CALL_US * 1000 and nap.cpu_ns < spin.cpu_ns / 10
    assert spin.energy_method == nap.energy_method == method
    assert spin.energy_j is not None and nap.energy_j is not None and nap.energy_j > 0
    assert spin.energy_j >= 10 * nap.energy_j, (spin.energy_j, nap.energy_j)
    (split,) = snap.energy_split
    assert split.device == "cpu" and split.method == method
    assert spin.energy_j + nap.energy_j <= split.measured_j + 1e-9
    assert split.attributed_j == pytest.approx(spin.energy_j + nap.energy_j, rel=1e-6)
    return rows


@pytest.mark.ebpf
@requires_root
def test_a_spinning_call_costs_ten_times_a_sleeping_one_by_the_power_model(
    workload: Workload, tmp_path: Path
) -> None:
    sweep = DeviceSweep(power_model=PowerModel.parse("10:90"), sysfs=tmp_path, period_s=0.25)
    snap = _spin_and_nap(workload, sweep)
    _check_split(snap, "estimate-oncpu")
    (cpu,) = [d for d in snap.devices if d.kind == "cpu"]
    assert cpu.energy_source == "estimate"


@pytest.mark.ebpf
@requires_root
def test_a_spinning_call_costs_ten_times_a_sleeping_one_by_rapl_that_wraps(
    workload: Workload, fake_rapl: FakeRapl, tmp_path: Path
) -> None:
    sweep = DeviceSweep(sysfs=tmp_path / "sys", period_s=0.25)
    snap = _spin_and_nap(workload, sweep)
    _check_split(snap, "rapl-oncpu")
    (cpu,) = [d for d in snap.devices if d.kind == "cpu"]
    assert cpu.energy_source == "rapl" and cpu.energy_j is not None
    assert fake_rapl.total_uj > 2 * FakeRapl.RANGE_UJ  # it wrapped, twice at least
    # Every wrap counted: the reading spans the calls at least (2.4 s), and no more than
    # the counter advanced in all.
    calls_s = 60 * 2 * CALL_US / 1e6
    assert 0.9 * fake_rapl.watts * calls_s <= cpu.energy_j <= fake_rapl.total_uj / 1e6


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


@pytest.mark.ebpf
@requires_root
def test_joules_in_a_compact_recording_and_its_export(workload_bin: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    specs = [f"--probe=uprobe:{workload_bin}:{fn}" for fn in ("held_fn", "napped_fn")]
    script = ["sleep", "1200", "heldnap", "30", str(CALL_US), "sleep", "1200", "exit", "0"]
    subprocess.run(
        [
            *CLI,
            "record",
            *specs,
            *("--cpu-power-model", "10:90", "--interval", "0.3"),
            *("--format", "compact", "--out", str(out), "--", str(workload_bin)),
            *script,
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert any(line.get("schema_version") == 2 for line in lines)  # compact lines there
    exported = subprocess.run(
        [*CLI, "export", str(out), "--out", "-"], check=True, capture_output=True, text=True
    ).stdout.splitlines()
    assert len(exported) == len(lines)
    last = Snapshot.from_json(json.loads(exported[-1]))
    _check_split(last, "estimate-oncpu", calls=30)


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
    from adaptyst_top.collectors.scope_cpu import TICK_NS, ScopeCpu

    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    napper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)  # both started
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
