"""A CUDA load with a known shape, for scripts/gpu_check.sh (needs cupy and a GPU).

Allocates a known number of bytes through cupy's pool, idles, runs an fp32 GEMM loop
(at full load, or one product at a time, then a sleep that leaves it busy --duty
of the time), then idles holding its memory, and exits.
What it did (its PID, the bytes cupy holds, the busy window in CLOCK_MONOTONIC
seconds, the GEMM rate, one product's time alone and the GPU time its products took
by CUDA events) goes to --info as JSON, so that the monitor's readings can be checked
against it. With --go FILE, it times a product alone, then waits for FILE to hold a
CLOCK_MONOTONIC time and starts its loop then: two loads started one after the other
run together.

    python3 -m experiments.gpu.gpu_load --info FILE [--idle-before S | --go FILE]
        [--busy S] [--idle-after S] [--duty F]

It imports nothing of this project's: gpu_check.py also runs a copy of it by path.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

GEMM_N = 8192  # 256 MiB a matrix: one product is ~20 ms on an H100-class GPU
BALLAST_GIB = 4  # held and touched: the memory the monitor must see


def write(path: Path, info: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(info))
    tmp.replace(path)  # a reader never sees half a file


def wait_for_start(go: Path, timeout_s: float = 180.0) -> float:
    """The start time GO holds, once it is there (SystemExit after TIMEOUT_S: the
    check that started this load is gone, and a load never waits on forever)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            return float(go.read_text())
        except (OSError, ValueError):  # not there yet, or half written
            time.sleep(0.01)
    raise SystemExit(f"gpu_load: no start time in {go} after {timeout_s:.0f} s")


def time_alone(cp: Any, first: Any, last: Any, a: Any, b: Any, c: Any) -> float:
    """One product's GPU time (ms): the median of three, after one that warms cuBLAS."""
    times = []
    for _ in range(4):
        first.record()
        cp.matmul(a, b, out=c)
        last.record()
        last.synchronize()
        times.append(cp.cuda.get_elapsed_time(first, last))
    return round(float(sorted(times[1:])[1]), 4)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--info", required=True, type=Path)
    ap.add_argument("--idle-before", type=float, default=3.0)
    ap.add_argument("--busy", type=float, default=10.0)
    ap.add_argument("--idle-after", type=float, default=5.0)
    ap.add_argument("--go", type=Path, help="a file that will hold the loop's start time")
    ap.add_argument("--duty", type=float, default=1.0, help="the share of time busy")
    args = ap.parse_args()
    if not 0.0 < args.duty <= 1.0:
        ap.error("--duty: a share above 0 and at most 1")

    import cupy as cp  # type: ignore[import-not-found]

    a = cp.random.random((GEMM_N, GEMM_N), dtype=cp.float32)
    b = cp.random.random((GEMM_N, GEMM_N), dtype=cp.float32)
    c = cp.empty((GEMM_N, GEMM_N), dtype=cp.float32)
    ballast = cp.ones((BALLAST_GIB << 30) // 4, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    first, last = cp.cuda.Event(), cp.cuda.Event()
    # Timed before the loop, while no other load runs: --go's mode.
    product_ms = None if args.go is None else time_alone(cp, first, last, a, b, c)
    pool = cp.get_default_memory_pool()
    info: dict[str, Any] = {
        "pid": os.getpid(),
        "cupy_pool_bytes": int(pool.total_bytes()),
        "cupy_arrays_bytes": int(a.nbytes + b.nbytes + c.nbytes + ballast.nbytes),
        "product_ms": product_ms,
        "allocated_at": time.monotonic(),
    }
    write(args.info, info)
    if args.go is None:
        time.sleep(args.idle_before)
    else:
        busy_at = wait_for_start(args.go)
        info["late_s"] = round(max(0.0, time.monotonic() - busy_at), 3)
        time.sleep(max(0.0, busy_at - time.monotonic()))

    start = time.monotonic()
    products, gpu_ms = 0, 0.0
    burst = 4 if args.duty == 1.0 else 1
    while (slot := time.monotonic()) - start < args.busy:
        first.record()
        for _ in range(burst):  # a short queue: the busy window is honest
            cp.matmul(a, b, out=c)
        products += burst
        last.record()
        last.synchronize()
        gpu_ms += cp.cuda.get_elapsed_time(first, last)
        if args.duty < 1.0:
            spent = time.monotonic() - slot
            time.sleep(max(0.0, spent / args.duty - spent))
    end = time.monotonic()
    info.update(
        busy_from=start,
        busy_to=end,
        products=products,
        gpu_busy_s=round(gpu_ms / 1e3, 4),
        fp32_tflops=round(2 * GEMM_N**3 * products / (end - start) / 1e12, 1),
    )
    write(args.info, info)
    time.sleep(args.idle_after)
    info["exited_at"] = time.monotonic()
    write(args.info, info)
    del a, b, c, ballast
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
