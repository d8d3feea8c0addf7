"""A CUDA load with a known shape, for scripts/gpu_check.sh (needs cupy and a GPU).

Allocates a known number of bytes through cupy's pool, idles, runs an fp32 GEMM loop
at full load, then idles holding its memory, and exits. What it did (its PID, the
bytes cupy holds, the busy window in CLOCK_MONOTONIC seconds, the GEMM rate) goes to
--info as JSON, so that the monitor's readings can be checked against it.

    python3 bench/gpu_load.py --info FILE [--idle-before S] [--busy S] [--idle-after S]
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--info", required=True, type=Path)
    ap.add_argument("--idle-before", type=float, default=3.0)
    ap.add_argument("--busy", type=float, default=10.0)
    ap.add_argument("--idle-after", type=float, default=5.0)
    args = ap.parse_args()

    import cupy as cp  # type: ignore[import-not-found]

    a = cp.random.random((GEMM_N, GEMM_N), dtype=cp.float32)
    b = cp.random.random((GEMM_N, GEMM_N), dtype=cp.float32)
    c = cp.empty((GEMM_N, GEMM_N), dtype=cp.float32)
    ballast = cp.ones((BALLAST_GIB << 30) // 4, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    pool = cp.get_default_memory_pool()
    info: dict[str, Any] = {
        "pid": os.getpid(),
        "cupy_pool_bytes": int(pool.total_bytes()),
        "cupy_arrays_bytes": int(a.nbytes + b.nbytes + c.nbytes + ballast.nbytes),
        "allocated_at": time.monotonic(),
    }
    write(args.info, info)
    time.sleep(args.idle_before)

    start = time.monotonic()
    products = 0
    while time.monotonic() - start < args.busy:
        cp.matmul(a, b, out=c)
        products += 1
        if products % 4 == 0:
            cp.cuda.Device().synchronize()  # keeps the queue short: the window is honest
    cp.cuda.Device().synchronize()
    end = time.monotonic()
    info.update(
        busy_from=start,
        busy_to=end,
        products=products,
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
