"""Joules per probe row: on-CPU time measured in the kernel, the CPU's energy split over
the node's busy time, never more than the device measured."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptyst_top.collectors.devices.cpu import PowerModel
from adaptyst_top.collectors.devices.sweep import DeviceSweep
from adaptyst_top.collectors.hub import Hub
from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
from adaptyst_top.snapshot import Snapshot
from tests.support.cli import CLI
from tests.support.marks import requires_root
from tests.support.workload import Workload

# serial: on-CPU time against wall time
pytestmark = pytest.mark.serial

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


TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def _spin_and_nap(workload: Workload, sweep: DeviceSweep) -> tuple[Snapshot, int]:
    """Snapshots while the two functions run side by side; the last one after them, and
    the CPU time the target spent on the calls, as its kernel counts it (the truth the
    spinning call's on-CPU time is held to, on an idle machine or a busy one)."""
    with ProbeEngine(pid=workload.pid) as engine:
        hub = Hub(engine, sweep)
        for fn in ("held_fn", "napped_fn"):
            group = engine.add(f"uprobe:{workload.binary}:{fn}")
            assert engine.wait(120) and group.state == "attached", group.error
        hub.snapshot()
        done = threading.Event()
        cpu: list[int] = []

        def run() -> None:
            cpu.append(workload.cpu_ns())
            workload.run(f"heldnap 60 {CALL_US}")
            cpu.append(workload.cpu_ns())
            done.set()

        runner = threading.Thread(target=run, daemon=True)
        runner.start()
        snap = hub.snapshot()
        while not done.wait(0.3):
            snap = hub.snapshot()
        runner.join()
        time.sleep(sweep.period_s * 1.2)  # the last device reading after the calls
        snap = hub.snapshot()
        hub.close()
        return snap, cpu[1] - cpu[0]


def _check_split(snap: Snapshot, method: str, target_cpu_ns: int, calls: int = 60) -> None:
    rows = {p.name: p for p in snap.probes}
    spin, nap = rows["held_fn"], rows["napped_fn"]
    assert spin.count == nap.count == calls
    # Equal latency, side by side; the spinning one is on a CPU, the sleeping one is not.
    # Medians: a busy-wait that is off the CPU when its time is up returns late (one
    # took 148 ms for 20 beside two hogs), which moves a mean of 60 and not a median.
    assert spin.mean_ns is not None and spin.p50_ns is not None and nap.p50_ns is not None
    assert 0.8 < spin.p50_ns / nap.p50_ns < 1.25, (spin.p50_ns, nap.p50_ns)
    assert spin.cpu_ns is not None and nap.cpu_ns is not None
    # The spin is on the CPU for nearly all the target's CPU time over the calls (the
    # nap and the loop take the rest), however much of its wall time the machine gave it.
    assert 0.9 * target_cpu_ns <= spin.cpu_ns <= target_cpu_ns + 2 * TICK_NS, (
        spin.cpu_ns,
        target_cpu_ns,
    )
    assert spin.cpu_ns <= 1.1 * spin.count * spin.mean_ns + 2 * TICK_NS  # never past its wall
    assert nap.cpu_ns < spin.cpu_ns / 10
    assert spin.energy_method == nap.energy_method == method
    assert spin.energy_j is not None and nap.energy_j is not None and nap.energy_j > 0
    assert spin.energy_j >= 10 * nap.energy_j, (spin.energy_j, nap.energy_j)
    (split,) = snap.energy_split
    assert split.device == "cpu" and split.method == method
    assert spin.energy_j + nap.energy_j <= split.measured_j + 1e-9
    assert split.attributed_j == pytest.approx(spin.energy_j + nap.energy_j, rel=1e-6)


@pytest.mark.ebpf
@requires_root
def test_a_spinning_call_costs_ten_times_a_sleeping_one_by_the_power_model(
    workload: Workload, tmp_path: Path
) -> None:
    sweep = DeviceSweep(power_model=PowerModel.parse("10:90"), sysfs=tmp_path, period_s=0.25)
    snap, target_cpu_ns = _spin_and_nap(workload, sweep)
    _check_split(snap, "estimate-oncpu", target_cpu_ns)
    (cpu,) = [d for d in snap.devices if d.kind == "cpu"]
    assert cpu.energy_source == "estimate"


@pytest.mark.ebpf
@requires_root
def test_a_spinning_call_costs_ten_times_a_sleeping_one_by_rapl_that_wraps(
    workload: Workload, fake_rapl: FakeRapl, tmp_path: Path
) -> None:
    sweep = DeviceSweep(sysfs=tmp_path / "sys", period_s=0.25)
    snap, target_cpu_ns = _spin_and_nap(workload, sweep)
    _check_split(snap, "rapl-oncpu", target_cpu_ns)
    (cpu,) = [d for d in snap.devices if d.kind == "cpu"]
    assert cpu.energy_source == "rapl" and cpu.energy_j is not None
    assert fake_rapl.total_uj > 2 * FakeRapl.RANGE_UJ  # it wrapped, twice at least
    # Every wrap counted: the reading spans the calls at least (2.4 s), and no more than
    # the counter advanced in all.
    calls_s = 60 * 2 * CALL_US / 1e6
    assert 0.9 * fake_rapl.watts * calls_s <= cpu.energy_j <= fake_rapl.total_uj / 1e6


@pytest.mark.ebpf
@requires_root
def test_joules_in_a_compact_recording_and_its_export(workload_bin: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    specs = [f"--probe=uprobe:{workload_bin}:{fn}" for fn in ("held_fn", "napped_fn")]
    script = ["sleep", "1200", "cpu", "heldnap", "30", str(CALL_US), "cpu", "sleep", "1200"]
    record = subprocess.run(
        [
            *CLI,
            "record",
            *specs,
            *("--cpu-power-model", "10:90", "--interval", "0.3"),
            *("--format", "compact", "--out", str(out), "--", str(workload_bin)),
            *script,
            *("exit", "0"),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert record.returncode == 0, record.stderr
    # The target's "cpu NS" lines, around the calls (its output is record's, to a file).
    before, after = [
        int(line.split()[1]) for line in record.stdout.splitlines() if line.startswith("cpu ")
    ]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert any(line.get("schema_version") == 2 for line in lines)  # compact lines there
    exported = subprocess.run(
        [*CLI, "export", str(out), "--out", "-"], check=True, capture_output=True, text=True
    ).stdout.splitlines()
    assert len(exported) == len(lines)
    last = Snapshot.from_json(json.loads(exported[-1]))
    _check_split(last, "estimate-oncpu", after - before, calls=30)
