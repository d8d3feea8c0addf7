"""Per-job energy: a CPU's energy split by the jobs' CPU time, the rest unattributed,
never more than the device measured; a device without a method unattributed whole."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adaptyst_top.collectors.energy.jobs import UNATTRIBUTED, JobEnergy
from adaptyst_top.snapshot import DeviceReading

TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def process(
    proc: Path, pid: int, ticks: int, job: str | None, start: int = 100, comm: str = "app"
) -> None:
    """A process of JOB (below the job's step daemon, as Slurm starts tasks; it also
    says SLURM_JOB_ID, as tasks do), or of none; 99 only says it is the job's."""
    parent = 1
    if job and job != "99":
        parent = 1000 + int(job)
        stepd = proc / str(parent)
        stepd.mkdir(parents=True, exist_ok=True)
        (stepd / "comm").write_text("slurmstepd\n")
        (stepd / "stat").write_text(f"{parent} (slurmstepd) S 1 " + "0 " * 40 + "\n")
        (stepd / "cmdline").write_bytes(f"slurmstepd: [{job}.batch]\0".encode())
    d = proc / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    fields = ["S", str(parent)] + ["0"] * 9 + [str(ticks), "0"] + ["0"] * 6 + [str(start)]
    (d / "stat").write_text(f"{pid} ({comm}) " + " ".join(fields + ["0"] * 30) + "\n")
    (d / "comm").write_text(comm.split(" (")[0] + "\n")
    (d / "environ").write_bytes(f"SLURM_JOB_ID={job}\0".encode() if job else b"HOME=/\0")


def devices(cpu_j: float, gpu_j: float) -> list[DeviceReading]:
    cpu = DeviceReading("cpu", "cpu", "CPU", energy_j=cpu_j, energy_source="rapl")
    gpu = DeviceReading("gpu:0", "gpu", "GPU", energy_j=gpu_j, energy_source="nvml")
    return [cpu, gpu]


@pytest.mark.system  # Slurm's cgroup layout made by hand needs root
def test_split_by_cpu_time_and_never_more_than_measured(tmp_path: Path) -> None:
    busy = [0]
    energy = JobEnergy(tmp_path, busy_ns=lambda: busy[0])
    for pid, job in ((10, "42"), (11, "43"), (12, None)):
        process(tmp_path, pid, 0, job)
    energy.update(devices(0.0, 0.0))
    # 1 s of node busy time: job 42 used 0.5 s, job 43 0.25 s, a process of no job 0.1 s.
    process(tmp_path, 10, int(0.5e9) // TICK_NS, "42")
    process(tmp_path, 11, int(0.25e9) // TICK_NS, "43")
    process(tmp_path, 12, int(0.1e9) // TICK_NS, None)
    busy[0] = 1_000_000_000
    energy.update(devices(100.0, 300.0))
    t = energy.totals
    assert abs(t[("42", "cpu", "cpu-time")] - 50.0) < 1e-6
    assert abs(t[("43", "cpu", "cpu-time")] - 25.0) < 1e-6
    assert abs(t[(UNATTRIBUTED, "cpu", "cpu-time")] - 25.0) < 1e-6
    assert t[(UNATTRIBUTED, "gpu:0", "none")] == 300.0
    # Jobs' CPU time above the node's busy time (clocks read apart): shares of the whole.
    process(tmp_path, 10, int(1.5e9) // TICK_NS, "42")
    busy[0] += 500_000_000
    energy.update(devices(200.0, 300.0))
    cpu_total = sum(v for (_, dev, _), v in energy.totals.items() if dev == "cpu")
    assert abs(cpu_total - 200.0) < 1e-6
    assert all(v >= 0 for v in energy.totals.values())
    # A PID reused by another process is a new process: its old CPU time is not its job's.
    process(tmp_path, 11, 0, "99", start=500)
    busy[0] += 1
    energy.update(devices(200.0, 300.0))
    assert not any(job == "99" for job, _, _ in energy.totals)


@pytest.mark.system  # Slurm's cgroup layout made by hand needs root
def test_a_slurm_daemon_s_fork_that_becomes_a_job_s_task_is_the_job_s(tmp_path: Path) -> None:
    # slurmstepd forks, and the fork execs the task with SLURM_JOB_ID: the same PID and
    # start, another program and environment. Read before the exec, it was no job's.
    busy = [0]
    energy = JobEnergy(tmp_path, busy_ns=lambda: busy[0])
    process(tmp_path, 20, 0, None, comm="slurmstepd")
    energy.update(devices(0.0, 0.0))
    process(tmp_path, 20, int(0.1e9) // TICK_NS, "42", comm="solver (x)")  # after exec
    busy[0] = 1_000_000_000
    energy.update(devices(100.0, 0.0))
    assert ("42", "cpu", "cpu-time") not in energy.totals  # its time as the fork: no job's
    process(tmp_path, 20, int(0.6e9) // TICK_NS, "42", comm="solver (x)")
    busy[0] += 1_000_000_000
    energy.update(devices(200.0, 0.0))
    assert abs(energy.totals[("42", "cpu", "cpu-time")] - 50.0) < 1e-6
    # A task that names itself (prctl) keeps its job and its CPU time.
    process(tmp_path, 20, int(1.1e9) // TICK_NS, "42", comm="solver-main")
    busy[0] += 1_000_000_000
    energy.update(devices(300.0, 0.0))
    assert abs(energy.totals[("42", "cpu", "cpu-time")] - 100.0) < 1e-6
