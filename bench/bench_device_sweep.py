"""CPU time of one device sweep (goal: <= 5 ms here), against a peer in the same run:
the bare psutil reads every monitor does (per-core CPU, memory, load).

    .venv/bin/python bench/bench_device_sweep.py [--sweeps N] [--json]

Also measured: the sweep with 8 fake NVML GPUs (the real pynvml structures and
units; the driver calls themselves are not in it: no GPU here).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adaptyst_top.collectors.devices import DeviceSweep  # noqa: E402
from tests.fake_nvml import FakeGpu, FakeNvml  # noqa: E402


def cpu_ms_per_call(f: Callable[[float], object], n: int) -> float:
    t0 = time.process_time()
    for i in range(n):
        f(float(i) * 1.0)  # one simulated second apart: every sweep really reads
    return (time.process_time() - t0) * 1e3 / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sweeps", type=int, default=300)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    def peer(_now: float) -> object:
        return (psutil.cpu_percent(percpu=True), psutil.virtual_memory(), os.getloadavg())

    here = DeviceSweep()
    fake8 = DeviceSweep(
        nvml=FakeNvml([FakeGpu(bus_id=f"00000000:{17 + i:02x}:00.0") for i in range(8)])
    )
    res = {
        "peer_psutil_ms": cpu_ms_per_call(peer, args.sweeps),
        "sweep_this_machine_ms": cpu_ms_per_call(lambda t: here.read(now=t), args.sweeps),
        "sweep_8_fake_gpus_ms": cpu_ms_per_call(lambda t: fake8.read(now=t), args.sweeps),
        "devices_this_machine": len(here.read(now=1e9)),
    }
    res["ratio_vs_peer"] = res["sweep_this_machine_ms"] / res["peer_psutil_ms"]
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:<28} {v:10.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
