"""Device collectors: real psutil and PoCL here; fakes with the real names, units and
errors for NVML, RAPL, AMD hwmon, XRT and DFL."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from adaptyst_top.collectors.devices.nvml import COUNTER_EVERY_S, NvmlCollector
from tests.support.as_user import run_as
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.marks import IS_ROOT


@pytest.mark.system  # the fake GPU's processes are root's: seen whole only as root
def test_nvml_full_reading() -> None:
    fake = FakeNvml([FakeGpu(procs=[(4242, 2 << 30)], proc_util=[(4242, 87, 1000)])])
    c = NvmlCollector(fake)
    (first,) = c.read(now=0.0)
    assert first.extra["processes"] == [{"pid": 4242, "mem_bytes": 2 << 30, "sm_util": 0.87}]
    fake.gpus[0].energy_mj += 250_000  # +250 J by the next read of the counter
    (r,) = c.read(now=COUNTER_EVERY_S)
    assert r.id == "gpu:0" and r.kind == "gpu" and r.name == "NVIDIA H200"
    assert r.util == 0.5 and r.extra["mem_util"] == 0.2
    assert r.mem_used_bytes == 10 << 30 and r.mem_total_bytes == 141 << 30
    assert r.power_w == 310.0  # the instant field, in W
    assert r.energy_j == 250.0 and r.energy_source == "nvml" and r.energy_method == "counter"
    assert r.temp_c == 45.0 and r.extra["sm_clock_mhz"] == 1980
    # No utilisation sample newer than the last one (NVML answers NOT_FOUND): memory only.
    assert r.extra["processes"] == [{"pid": 4242, "mem_bytes": 2 << 30, "energy_j": 0.0}]
    assert r.extra["pci_bus_id"] == "00000000:17:00.0"


@pytest.mark.skipif(not IS_ROOT, reason="switching users needs root")
def test_a_user_sees_their_own_gpu_processes_and_the_others_only_in_total() -> None:
    # NVML hands every user the PIDs and memory of all processes on the GPU (as it did
    # on the H200); a user of the monitor sees their own, the rest as a count.
    def as_nobody() -> bytes:
        mine = subprocess.Popen(["sleep", "30"])  # a process of this user, exec'd
        try:
            fake = FakeNvml(
                [FakeGpu(procs=[(mine.pid, 1 << 30), (1, 2 << 30)], proc_util=[(1, 90, 5)])]
            )
            (r,) = NvmlCollector(fake).read(now=0.0)
            return json.dumps(
                [mine.pid, r.extra["processes"], r.extra.get("processes_of_others")]
            ).encode()
        finally:
            mine.kill()
            mine.wait()

    code, out = run_as(65534, as_nobody)
    assert code == 0, out
    pid, procs, others = json.loads(out)
    assert procs == [{"pid": pid, "mem_bytes": 1 << 30, "name": "sleep"}]
    assert others == {"count": 1, "mem_bytes": 2 << 30}
    # Root sees every process, as nvidia-smi shows them to root.
    fake = FakeNvml([FakeGpu(procs=[(os.getpid(), 1 << 30), (1, 2 << 30)])])
    (r,) = NvmlCollector(fake).read(now=0.0)
    assert [p["pid"] for p in r.extra["processes"]] == sorted([1, os.getpid()])
    assert "processes_of_others" not in r.extra
