"""CPU time of one device sweep (goal: <= 5 ms here), against a peer in the same run:
the bare psutil reads every monitor does (per-core CPU, memory, load).

    .venv/bin/python -m bench.bench_device_sweep [--sweeps N] [--json] [--nvidia-smi]

Also measured: the sweep with 8 fake NVML GPUs (the real pynvml structures and
units; the driver calls themselves are not in it: no GPU here). Where an NVIDIA GPU
is, the NVML part of the sweep alone, and with --nvidia-smi the peer an operator
reaches for: one `nvidia-smi --query-gpu` of the same figures per sweep. Wall time is
reported beside CPU time: NVML calls wait on the driver.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import time
from collections.abc import Callable

import psutil

from adaptyst_top.collectors.devices.nvml import NvmlCollector
from adaptyst_top.collectors.devices.sweep import DeviceSweep
from bench import common
from tests.support.fake_nvml import FakeGpu, FakeNvml

# What the NVML collector reads, as nvidia-smi names it.
SMI_QUERY = (
    "utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,"
    "temperature.gpu,clocks.sm,uuid,pci.bus_id"
)


def ms_per_call(f: Callable[[float], object], n: int) -> tuple[float, float]:
    """(CPU ms, wall ms) per call, our process and its children's CPU both counted."""

    def cpu() -> float:
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + kids.ru_utime + kids.ru_stime

    c0, t0 = cpu(), time.perf_counter()
    for i in range(n):
        f(float(i) * 1.0)  # one simulated second apart: every sweep really reads
    return (cpu() - c0) * 1e3 / n, (time.perf_counter() - t0) * 1e3 / n


def nvidia_smi(_now: float) -> object:
    return subprocess.run(
        ["nvidia-smi", f"--query-gpu={SMI_QUERY}", "--format=csv,noheader,nounits"],
        capture_output=True,
        check=True,
    ).stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sweeps", type=int, default=300)
    ap.add_argument("--nvidia-smi", action="store_true", help="time nvidia-smi beside us")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    common.header(args.json)

    def peer(_now: float) -> object:
        return (psutil.cpu_percent(percpu=True), psutil.virtual_memory(), os.getloadavg())

    here = DeviceSweep()
    fake8 = DeviceSweep(
        nvml=FakeNvml([FakeGpu(bus_id=f"00000000:{17 + i:02x}:00.0") for i in range(8)])
    )
    res: dict[str, float] = {}
    res["peer_psutil_ms"], res["peer_psutil_wall_ms"] = ms_per_call(peer, args.sweeps)
    res["sweep_this_machine_ms"], res["sweep_this_machine_wall_ms"] = ms_per_call(
        lambda t: here.read(now=t), args.sweeps
    )
    res["sweep_8_fake_gpus_ms"], _ = ms_per_call(lambda t: fake8.read(now=t), args.sweeps)
    res["devices_this_machine"] = len(here.read(now=1e9))
    if any(s.name == "nvml" and s.state == "ok" for s in here.sources()):  # a GPU
        nvml = NvmlCollector()
        res["nvml_gpus"] = len(nvml.gpus)
        res["nvml_only_ms"], res["nvml_only_wall_ms"] = ms_per_call(
            lambda t: nvml.read(now=t), args.sweeps
        )
        nvml.close()
    if args.nvidia_smi:
        calls = max(5, args.sweeps // 15)  # each is a process start: ~tens of ms
        res["nvidia_smi_ms"], res["nvidia_smi_wall_ms"] = ms_per_call(nvidia_smi, calls)
        res["sweep_vs_nvidia_smi_wall"] = (
            res["sweep_this_machine_wall_ms"] / res["nvidia_smi_wall_ms"]
        )
    here.close()
    res["ratio_vs_peer"] = res["sweep_this_machine_ms"] / res["peer_psutil_ms"]
    common.footer(res, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
