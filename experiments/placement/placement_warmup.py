"""How a device's runs of a task speed up after it takes over from another device.

An exploration runs a device for a few executions right after the other device's runs;
once a task is placed there, it runs there back to back. Where the two differ (the
caches the other device's runs filled), a short exploration measures the device slower
than it will run, and the advisor weighs it so. Per input: the median of runs 2-4 of
4-run blocks (an exploration, its cold first run left out, as the advisor does) and of
runs 2-4 and 5-12 of 12-run blocks, each block after 5 runs on the CPU, alternated.

    .venv/bin/python -m experiments.placement.placement_warmup [--device opencl:0]
        [--rounds 6] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from adaptyst_top.placement import kernels

CASES = (
    ("spmv", 8000, 0.02),
    ("spmv", 20000, 0.005),
    ("spmv", 60000, 0.004),
    ("logistic", 20000, 0.01),
)


def ms(run: Callable[[kernels.Inputs], Any], inp: kernels.Inputs) -> float:
    t0 = time.perf_counter()
    run(inp)
    return (time.perf_counter() - t0) * 1e3


def measure(
    devices: dict[str, Any], device: str, inp: kernels.Inputs, rounds: int
) -> dict[str, float]:
    cpu, dev = devices["cpu"], devices[device]
    kernels.forget_inputs(devices)
    ms(dev, inp)  # the upload: a move's cost, not a run's
    short: list[float] = []
    long_head: list[float] = []
    long_tail: list[float] = []
    for _ in range(rounds):
        for _ in range(5):
            ms(cpu, inp)
        short += [ms(dev, inp) for _ in range(4)][1:]
        for _ in range(5):
            ms(cpu, inp)
        block = [ms(dev, inp) for _ in range(12)]
        long_head += block[1:4]
        long_tail += block[4:]
    steady = statistics.median(long_tail)
    return {
        "exploration_ms": round(statistics.median(short), 3),
        "block_runs_2_4_ms": round(statistics.median(long_head), 3),
        "steady_ms": round(steady, 3),
        "exploration_vs_steady": round(statistics.median(short) / steady, 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--device", default="opencl:0")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--json", action="store_true", help="one JSON line of every figure")
    args = ap.parse_args()
    devices = kernels.available_devices()
    if args.device not in devices or args.device == "cpu":
        print(f"placement_warmup: no device {args.device} here", file=sys.stderr)
        return 1
    rounds = max(1, args.rounds)
    out = {}
    for kind, n, density in CASES:
        out[f"{kind}:{n}"] = row = measure(
            devices, args.device, kernels.make_inputs(kind, n, density), rounds
        )
        if not args.json:
            print(
                f"{kind:<8} n={n:<6} " + "  ".join(f"{k}={v}" for k, v in row.items()), flush=True
            )
    if args.json:
        print(json.dumps({"device": args.device, "rounds": rounds, "cases": out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
