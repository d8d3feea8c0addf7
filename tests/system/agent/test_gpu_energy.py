"""A GPU's energy per process and per job, from NVML's per-process utilisation (a fake
NVML with pynvml's names, units and errors): the processes and the idle draw add up to
the counter; the idle draw is never a job's; MIG gives no per-process figure."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from adaptyst_top.collectors.devices.nvml import PROCESS_EVERY_S, NvmlCollector
from adaptyst_top.collectors.energy.gpu_split import METHOD
from adaptyst_top.collectors.energy.jobs import IDLE, UNATTRIBUTED, JobEnergy
from adaptyst_top.snapshot import DeviceReading
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.marks import requires_root
from tests.system.agent.test_job_energy import process
from tests.unit.collectors.energy.test_gpu_energy import JOBS, _gpu, _per_process, _read


@pytest.mark.system  # Slurm's cgroup layout made by hand needs root
def test_each_job_gets_its_processes_joules_and_the_idle_draw_none(tmp_path: Path) -> None:
    for pid, job in JOBS.items():
        process(tmp_path, pid, 0, job)
    gpu, collector = _gpu()
    jobs = JobEnergy(tmp_path, busy_ns=lambda: 0)
    jobs.update([_read(collector, 0.0)])
    gpu.energy_mj += 10_000  # the split's first window (idle), before the agent's first
    jobs.update([_read(collector, PROCESS_EVERY_S)])  # split reading: not charged
    gpu.proc_util = [(501, 50, 10), (502, 25, 10), (503, 25, 10)]
    gpu.energy_mj += 200_000
    jobs.update([_read(collector, 2 * PROCESS_EVERY_S)])
    gpu.energy_mj += 100_000  # an idle window
    jobs.update([_read(collector, 3 * PROCESS_EVERY_S)])
    totals = {job: j for (job, device, method), j in jobs.totals.items() if method == METHOD}
    assert totals == pytest.approx({"101": 100.0, "202": 50.0, UNATTRIBUTED: 50.0, IDLE: 100.0})
    # Every joule the counter measured, once: jobs + no job's + idle = the counter's 300 J.
    assert sum(totals.values()) == pytest.approx(300.0)


GPU_TASKS = """
import sys, time
from adaptyst_top.placement.task_api import task
sys.stdin.readline()
for _ in range(20):
    with task("short", "cuda:0", 1000):
        time.sleep(0.01)
    with task("long", "cuda:0", 1000):
        time.sleep(0.03)
    with task("short", "cpu", 1000):
        end = time.thread_time() + 0.002
        while time.thread_time() < end:
            pass
print("done", flush=True)
sys.stdin.readline()
"""


@pytest.mark.ebpf
@requires_root
def test_gpu_task_rows_get_their_process_s_gpu_joules_split_by_their_time() -> None:
    """Real task probes on a process that NVML (a fake, its real names and units) lists
    with 60% of the SMs beside another's 20%: its GPU joules go to its GPU task rows,
    by each row's time (1:3), none to its CPU task, none of the other process's."""
    import subprocess
    import sys

    from adaptyst_top.collectors.energy.probes import ProbeEnergy
    from adaptyst_top.collectors.energy.scope_cpu import ScopeCpu
    from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
    from adaptyst_top.placement.task_api import TASK_SPEC

    child = subprocess.Popen(
        [sys.executable, "-c", GPU_TASKS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    other = 4_000_000  # no process of this session's
    gpu = FakeGpu(energy_mj=1_000_000, procs=[(child.pid, 1 << 30), (other, 1 << 30)])
    collector = NvmlCollector(FakeNvml([gpu]))
    collector.euid = 0
    energy = ProbeEnergy(scope=ScopeCpu(pids=lambda: [child.pid]))
    assert child.stdin is not None and child.stdout is not None
    try:
        with ProbeEngine(pid=child.pid) as engine:
            group = engine.add(TASK_SPEC)
            assert engine.wait(120) and group.state == "attached", group.error
            engine.read()
            energy.attribute(engine.snapshot_rows(False), [_read(collector, 0.0)])
            began = time.monotonic()
            child.stdin.write("go\n")
            child.stdin.flush()
            assert child.stdout.readline() == "done\n"
            gpu.energy_mj += 1_000_000  # 1 kJ while the tasks ran
            ts = gpu.proc_util[-1][2] + 1 if gpu.proc_util else 1
            gpu.proc_util = [(child.pid, 60, ts), (other, 20, ts)]
            engine.read()
            reading = _read(collector, 6.0)
            rows, splits = energy.attribute(engine.snapshot_rows(False), [reading])
            window_ns = (time.monotonic() - began) * 1e9
    finally:
        child.kill()
        child.wait()
    mine = _per_process(reading)[child.pid]
    assert mine > 0
    by_key = {r.key: r for r in rows}
    short, long_, on_cpu = (
        by_key["short|cuda:0|9|0"],
        by_key["long|cuda:0|9|0"],
        by_key["short|cpu|9|0"],
    )
    assert short.count == long_.count == on_cpu.count == 20
    assert short.energy_method == long_.energy_method == "nvml-process-util"
    assert short.energy_j is not None and long_.energy_j is not None
    # As much of the process's joules as the tasks' time covers of the window: the rest
    # was its GPU work outside probed tasks (here, none: the window is a little longer).
    tasks_ns = short.latency.mean_ns * 20 + long_.latency.mean_ns * 20  # type: ignore[operator]
    assert short.energy_j + long_.energy_j <= mine
    assert short.energy_j + long_.energy_j >= 0.95 * mine * min(1.0, tasks_ns / window_ns)
    assert long_.energy_j / short.energy_j == pytest.approx(
        long_.latency.mean_ns / short.latency.mean_ns,
        rel=1e-6,  # type: ignore[operator]
    )
    assert on_cpu.energy_j is None  # no CPU energy here, and none of the GPU's
    (split,) = splits
    assert split.device == "gpu" and split.measured_j == pytest.approx(1000.0)
    assert split.attributed_j == pytest.approx(short.energy_j + long_.energy_j, rel=1e-6)


class FakeAmdSmi:
    """amdsmi's Python API as this collector calls it: its names, units (W, µJ per count,
    engine time in ns) and exception class."""

    class AmdSmiLibraryException(Exception):
        pass

    def __init__(self, bdf: str) -> None:
        self.bdf = bdf
        self.energy_uj = 5_000_000.0
        self.gfx: dict[int, int] = {}  # pid -> cumulative GFX engine ns
        self.unsupported = False

    def amdsmi_init(self, *flags: object) -> None:
        pass

    def amdsmi_get_processor_handles(self) -> list[str]:
        return ["h0"]

    def amdsmi_get_gpu_device_bdf(self, h: str) -> str:
        return self.bdf

    def amdsmi_get_power_info(self, h: str) -> dict[str, object]:
        return {"average_socket_power": 300, "gfx_voltage": 800, "power_limit": 750}

    def amdsmi_get_energy_count(self, h: str) -> dict[str, object]:
        return {"energy_accumulator": int(self.energy_uj / 15.3), "counter_resolution": 15.3}

    def amdsmi_get_gpu_process_list(self, h: str) -> list[dict[str, object]]:
        if self.unsupported:
            raise self.AmdSmiLibraryException("AMDSMI_STATUS_NOT_SUPPORTED")
        return [
            {
                "name": "app",
                "pid": pid,
                "mem": 1 << 30,
                "engine_usage": {"gfx": ns, "enc": 0},
                "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": 1 << 30},
                "cu_occupancy": 0,
            }
            for pid, ns in self.gfx.items()
        ]


@pytest.mark.system  # Slurm's cgroup layout made by hand needs root
def test_amd_processes_get_the_cards_energy_by_their_gfx_engine_time(tmp_path: Path) -> None:
    from adaptyst_top.collectors.devices.amd_gpu import AmdGpuCollector
    from adaptyst_top.collectors.energy.gpu_split import AMD_METHOD
    from tests.unit.collectors.devices.test_device_collectors import amd_tree

    amd_tree(tmp_path / "sys")
    for pid, job in JOBS.items():
        process(tmp_path / "proc", pid, 0, job)
    smi = FakeAmdSmi("0000:03:00.0")
    smi.gfx = {501: 0, 502: 0, 503: 0}
    collector = AmdGpuCollector(tmp_path / "sys", amdsmi=smi)
    collector.euid = 0
    jobs = JobEnergy(tmp_path / "proc", busy_ns=lambda: 0)
    window_ns = int(PROCESS_EVERY_S * 1e9)

    def window(n: int, joules: float, shares: dict[int, float]) -> DeviceReading:
        for pid, share in shares.items():
            smi.gfx[pid] += int(share * window_ns)
        smi.energy_uj += joules * 1e6
        (r,) = collector.read(now=n * PROCESS_EVERY_S)
        jobs.update([r])
        return r

    window(0, 0.0, {})  # the first list: each process's engine time so far
    window(1, 100.0, {})  # the split's first window: all idle, before the agent's first
    r = window(2, 1000.0, {501: 0.6, 502: 0.2})
    assert r.extra["process_energy"] == AMD_METHOD
    got = _per_process(r)
    assert got[501] == pytest.approx(600.0, rel=1e-3) and got[502] == pytest.approx(200.0, rel=1e-3)
    assert got[503] == 0.0 and r.extra["idle_j"] == pytest.approx(300.0, rel=1e-3)
    assert sum(got.values()) + r.extra["idle_j"] == pytest.approx(1100.0, rel=1e-6)
    by_job = {job: j for (job, _, method), j in jobs.totals.items() if method == AMD_METHOD}
    assert by_job == pytest.approx({"101": 600.0, "202": 200.0, IDLE: 200.0}, rel=1e-3)
    # A part whose amdsmi lists no processes says so, and splits nothing.
    smi.unsupported = True
    (r,) = collector.read(now=3 * PROCESS_EVERY_S)
    assert r.extra["process_energy"].startswith("none: amdsmi lists no processes")
