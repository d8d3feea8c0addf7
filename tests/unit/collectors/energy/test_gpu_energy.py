"""A GPU's energy per process and per job, from NVML's per-process utilisation (a fake
NVML with pynvml's names, units and errors): the processes and the idle draw add up to
the counter; the idle draw is never a job's; MIG gives no per-process figure."""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest

from adaptyst_top.collectors.devices.nvml import PROCESS_EVERY_S, NvmlCollector
from adaptyst_top.collectors.energy.gpu_split import METHOD
from adaptyst_top.collectors.energy.jobs import IDLE, UNATTRIBUTED, JobEnergy
from adaptyst_top.snapshot import DeviceReading
from tests.support.fake_nvml import FakeGpu, FakeNvml

JOBS = {501: "101", 502: "202", 503: None}  # 503: a process of no job


def _gpu() -> tuple[FakeGpu, NvmlCollector]:
    gpu = FakeGpu(energy_mj=1_000_000, procs=[(pid, 1 << 30) for pid in JOBS])
    collector = NvmlCollector(FakeNvml([gpu]))
    collector.euid = 0  # the agent's view: every user's processes
    return gpu, collector


def _read(collector: NvmlCollector, t: float) -> DeviceReading:
    (r,) = collector.read(now=t)
    return r


def _per_process(r: DeviceReading) -> dict[int, float]:
    return {p["pid"]: p.get("energy_j", 0.0) for p in r.extra["processes"]}


def test_processes_and_idle_add_up_to_the_counter_and_an_idle_window_is_idle() -> None:
    gpu, collector = _gpu()
    _read(collector, 0.0)
    # Window 1: 501 at 60% and 502 at 20% of the SM (two samples each, as NVML's ~1/6 s
    # ones), 503 not busy: 400 J in all (the counter is in mJ).
    gpu.proc_util = [(501, 50, 10), (501, 70, 20), (502, 20, 10), (502, 20, 20)]
    gpu.energy_mj += 400_000
    r = _read(collector, PROCESS_EVERY_S)
    got = _per_process(r)
    assert got == pytest.approx({501: 240.0, 502: 80.0, 503: 0.0})
    assert r.extra["process_energy"] == METHOD and r.extra["idle_j"] == pytest.approx(80.0)
    # Window 2: no sample newer than the last (NVML_ERROR_NOT_FOUND): all of it idle.
    gpu.energy_mj += 100_000
    r = _read(collector, 2 * PROCESS_EVERY_S)
    assert _per_process(r) == pytest.approx(got)
    assert r.extra["idle_j"] == pytest.approx(180.0)
    assert sum(_per_process(r).values()) + r.extra["idle_j"] == pytest.approx(500.0)


def test_oversubscribed_shares_are_scaled_to_what_was_measured() -> None:
    gpu, collector = _gpu()
    _read(collector, 0.0)
    gpu.proc_util = [(501, 90, 10), (502, 90, 10)]  # sampled apart: 180% together
    gpu.energy_mj += 360_000
    r = _read(collector, PROCESS_EVERY_S)
    assert _per_process(r) == pytest.approx({501: 180.0, 502: 180.0, 503: 0.0})
    assert r.extra["idle_j"] == pytest.approx(0.0)


def test_mig_gives_no_per_process_energy_and_the_job_metric_says_none(tmp_path: Path) -> None:
    gpu, collector = _gpu()
    gpu.errors["nvmlDeviceGetProcessUtilization"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    gpu.proc_util = [(501, 50, 10)]
    jobs = JobEnergy(tmp_path, busy_ns=lambda: 0)
    jobs.update([_read(collector, 0.0)])
    gpu.energy_mj += 50_000
    r = _read(collector, PROCESS_EVERY_S)
    assert "energy_j" not in str(r.extra["processes"])
    assert r.extra["process_energy"].startswith("none")
    jobs.update([r])
    assert jobs.totals == {(UNATTRIBUTED, "gpu:0", "none"): pytest.approx(50.0)}


def test_a_process_gone_before_the_read_is_charged_to_no_one_s_pid(tmp_path: Path) -> None:
    gpu, collector = _gpu()
    jobs = JobEnergy(tmp_path, busy_ns=lambda: 0)
    jobs.update([_read(collector, 0.0)])
    gpu.energy_mj += 10_000  # the split's first window: idle, before the agent's first
    jobs.update([_read(collector, PROCESS_EVERY_S)])
    # 999 ran and exited within the window: its PID may be another process's by now.
    gpu.proc_util = [(999, 50, 10)]
    gpu.energy_mj += 100_000
    r = _read(collector, 2 * PROCESS_EVERY_S)
    gone = next(p for p in r.extra["processes"] if p["pid"] == 999)
    assert "energy_j" not in gone and r.extra["exited_j"] == pytest.approx(50.0)
    jobs.update([r])
    got = {job: j for (job, _d, method), j in jobs.totals.items() if method == METHOD}
    assert got == pytest.approx({UNATTRIBUTED: 50.0, IDLE: 50.0})


# --- AMD: amdsmi's per-process GFX engine time ---------------------------------------


def test_one_entry_a_process_each_at_its_own_time_is_the_window_s_share() -> None:
    # As NVML documents it and an H200 answered: one entry per process, its utilisation
    # since the last read, stamped with its own sample time. Counted over both entries'
    # times, each share would be halved and half the busy GPU's energy called idle.
    gpu, collector = _gpu()
    _read(collector, 0.0)
    gpu.proc_util = [(501, 60, 10), (502, 30, 11)]
    gpu.energy_mj += 100_000
    r = _read(collector, PROCESS_EVERY_S)
    assert _per_process(r) == pytest.approx({501: 60.0, 502: 30.0, 503: 0.0})
    assert r.extra["idle_j"] == pytest.approx(10.0)
