"""The demo workload: SpMV, GEMM, a reduction and the logistic map on every device
here, in phases whose input size and sparsity change so that the best device changes
over time. It uses
the task API (its task times reach the monitor through USDT) and obeys the advisor
(device_for). Run alone, it prints what ran where.

    python -m adaptyst_top.placement.demo [--duration S] [--phase-s S] [--quiet]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from adaptyst_top.placement.kernels import Inputs, available_devices, make_inputs
from adaptyst_top.placement.task_api import device_for, task


@dataclass(frozen=True)
class Phase:
    name: str
    spmv: tuple[int, float]  # rows, density
    gemm: int
    reduce: int
    logistic: int


# On this kind of machine (numpy/scipy vs PoCL on the same 2 cores): small SpMV is
# best on the CPU path, large SpMV on OpenCL; GEMM and the reduction stay on the CPU
# (launch cost, PoCL's GEMM); the logistic map, compute-heavy and element-wise, is
# OpenCL's wherever it runs on every core in SIMD: 1.15x at 20,000 elements, 1.9x at
# 10^6, 3.4x at 2x10^6 (2 vCPUs of a Zen 5, Debian's PoCL 3.1; the cases of
# experiments/placement/placement_eval.py). A newcomer sees it move within the first
# phase, where it is large enough to win by far even with a core taken by something else.
PHASES = (
    Phase("small", (3000, 0.004), 96, 200_000, 1_000_000),
    Phase("large", (100_000, 0.003), 128, 2_000_000, 2_000_000),
    Phase("medium", (20_000, 0.005), 160, 500_000, 20_000),
    Phase("large-sparse", (120_000, 0.001), 128, 1_000_000, 200_000),
)


def run(duration: float, phase_s: float, quiet: bool) -> int:
    devices = available_devices()
    names = list(devices)
    start = time.monotonic()
    cache: dict[tuple[str, int, float], Inputs] = {}
    i = 0
    while duration <= 0 or time.monotonic() - start < duration:
        phase = PHASES[i % len(PHASES)]
        i += 1
        inputs = {
            "spmv": make_inputs("spmv", phase.spmv[0], phase.spmv[1]),
            "gemm": make_inputs("gemm", phase.gemm),
            "reduce": make_inputs("reduce", phase.reduce),
            "logistic": make_inputs("logistic", phase.logistic),
        }
        cache.clear()
        phase_end = time.monotonic() + phase_s
        if duration > 0:  # --duration ends the run mid-phase too
            phase_end = min(phase_end, start + duration)
        runs: dict[str, dict[str, int]] = {}
        while time.monotonic() < phase_end:
            for kind, inp in inputs.items():
                dev = device_for(kind, size=inp.size, candidates=names)
                with task(kind, device=dev, size=inp.size, feature=inp.feature):
                    devices[dev](inp)
                runs.setdefault(kind, {}).setdefault(dev, 0)
                runs[kind][dev] += 1
            time.sleep(0.002)  # leave the monitor some CPU on a small machine
        if not quiet:
            done = ", ".join(f"{k}: {v}" for k, v in runs.items())
            print(f"phase {phase.name}: {done}", file=sys.stderr, flush=True)
    return 0


def command(phase_s: float = 12.0, duration: float = 0.0, quiet: bool = True) -> list[str]:
    """The argv that runs this demo (for `adaptyst-top demo`, recordings and tests)."""
    argv = [sys.executable, "-m", "adaptyst_top.placement.demo", "--phase-s", str(phase_s)]
    if duration > 0:
        argv += ["--duration", str(duration)]
    return argv + (["--quiet"] if quiet else [])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="adaptyst-top-demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--duration", type=float, default=0.0, help="seconds (0: until stopped)")
    ap.add_argument("--phase-s", type=float, default=12.0, help="seconds per phase (12)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    try:
        return run(args.duration, args.phase_s, args.quiet)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
