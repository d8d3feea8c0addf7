"""A CUDA program for `cuda:` rows on a real GPU (gpu_check's cuda_kernels part): CuPy
RawKernels that count their own launches and time each between two CUDA events.

  python -m experiments.gpu.cuda_kernels_app MODE --out FILE [--launches N] [--seed S]

irregular  kernels of four names (one longer than the probes' 31-byte key), each
           spinning a drawn time on the device's own timer, on two streams, with host
           pauses between bursts: launches and event milliseconds by name.
short      N launches of an empty kernel, as fast as the host issues them: launches/s.
memory     N launches of the empty kernel, then N more as a CUDA graph of 100: the
           process's resident memory at each tenth of each.

It also writes which libcupti the process holds at its end (the injection library's
choice), from its own /proc/self/maps.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

import cupy as cp  # type: ignore[import-not-found]

SPIN = r"""
#define SPIN(name) extern "C" __global__ void name(unsigned long long ns) {      \
    unsigned long long t0, t;                                                     \
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));                        \
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns); }
SPIN(spin_short)
SPIN(spin_mid)
SPIN(spin_long)
SPIN(adaptyst_check_spin_with_a_name_past_the_key)
extern "C" __global__ void empty_kernel(int x) { (void)x; }
"""
# Each name's spin, drawn uniformly between these (ns); irregular launches draw a name by weight.
SPINS = {
    "spin_short": (100_000, 200_000, 5),
    "spin_mid": (100_000, 400_000, 3),
    "spin_long": (500_000, 2_000_000, 1),
    "adaptyst_check_spin_with_a_name_past_the_key": (100_000, 300_000, 2),
}
SYNC_EVERY = 256  # launches whose events are read at once


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


def cupti_held() -> list[str]:
    maps = Path("/proc/self/maps").read_text().splitlines()
    return sorted({line.split()[-1] for line in maps if "libcupti" in line})


def irregular(module: Any, n: int, rng: random.Random) -> dict[str, Any]:
    kernels = {name: module.get_function(name) for name in SPINS}
    names = list(SPINS)
    weights = [SPINS[k][2] for k in names]
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    launches = dict.fromkeys(names, 0)
    event_ms = dict.fromkeys(names, 0.0)
    pending: list[tuple[str, Any, Any]] = []

    def read() -> None:
        for s in streams:
            s.synchronize()
        for name, e0, e1 in pending:
            event_ms[name] += cp.cuda.get_elapsed_time(e0, e1)
        pending.clear()

    t0 = time.monotonic()
    for i in range(n):
        name = rng.choices(names, weights)[0]
        lo, hi, _ = SPINS[name]
        stream = streams[rng.randrange(2)]
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record(stream)
        with stream:
            kernels[name]((1,), (1,), (cp.uint64(rng.randint(lo, hi)),))
        e1.record(stream)
        pending.append((name, e0, e1))
        launches[name] += 1
        if rng.random() < 0.05:  # a pause between bursts
            time.sleep(rng.uniform(0, 0.003))
        if len(pending) >= SYNC_EVERY or i == n - 1:
            read()
    return {"launches": launches, "event_ms": event_ms, "seconds": time.monotonic() - t0}


def short(module: Any, n: int) -> dict[str, Any]:
    kernel = module.get_function("empty_kernel")
    for _ in range(1000):  # warm: the module loaded, the launch path hot
        kernel((1,), (1,), (cp.int32(0),))
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        kernel((1,), (1,), (cp.int32(0),))
    cp.cuda.Device().synchronize()
    seconds = time.perf_counter() - t0
    return {
        "launches": {"empty_kernel": n + 1000},
        "timed_launches": n,
        "seconds": seconds,
        "launches_per_s": n / seconds,
    }


def memory(module: Any, n: int) -> dict[str, Any]:
    kernel = module.get_function("empty_kernel")
    step = max(1, n // 10)
    plain = []
    for i in range(n):
        kernel((1,), (1,), (cp.int32(0),))
        if (i + 1) % step == 0:
            cp.cuda.Device().synchronize()
            plain.append(rss_kib())
    stream = cp.cuda.Stream(non_blocking=True)
    per_graph = 100
    with stream:
        stream.begin_capture()
        for _ in range(per_graph):
            kernel((1,), (1,), (cp.int32(0),))
        graph = stream.end_capture()
    graphed = []
    graphs = max(1, n // per_graph)
    for i in range(graphs):
        graph.launch(stream)
        if (i + 1) % max(1, graphs // 10) == 0:
            stream.synchronize()
            graphed.append(rss_kib())
    return {
        "launches": {"empty_kernel": n + graphs * per_graph},
        "rss_kib_plain": plain,
        "rss_kib_graph": graphed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("irregular", "short", "memory"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--launches", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=58)
    args = ap.parse_args()
    module = cp.RawModule(code=SPIN)
    if args.mode == "irregular":
        result = irregular(module, args.launches, random.Random(args.seed))
    elif args.mode == "short":
        result = short(module, args.launches)
    else:
        result = memory(module, args.launches)
    cp.cuda.Device().synchronize()
    result.update(mode=args.mode, cupti=cupti_held(), rss_kib_end=rss_kib())
    args.out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
