"""What a thread's wake-up costs on this machine, the floor under every per-second
refresh: a Python thread that wakes once a second and does nothing, and the CPU time of
the first system call after a wake against the same call made again at once (caches
and branch predictors gone cold while asleep; on a VM, the host's too).

    .venv/bin/python -m bench.bench_wake_cost [--seconds 20] [--json]

Why it matters: the monitor's own CPU (bench_monitor_cpu.py) is a few milliseconds a
second, so each thread that wakes more than it must, and each hand-off between threads,
is a visible share of it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections.abc import Callable

from bench import common


def thread_ns(tid: int) -> int:
    with open(f"/proc/self/task/{tid}/schedstat") as f:
        return int(f.read().split()[0])


def idle_wake_us(seconds: float) -> float:
    """CPU time a second of a thread that wakes once a second and does nothing."""
    stop = threading.Event()
    started = threading.Event()
    tid: list[int] = []

    def sleeper() -> None:
        tid.append(threading.get_native_id())
        started.set()
        while not stop.wait(1.0):
            pass

    t = threading.Thread(target=sleeper, daemon=True)
    t.start()
    started.wait()
    time.sleep(2.0)  # past its start
    a = thread_ns(tid[0])
    time.sleep(seconds)
    b = thread_ns(tid[0])
    stop.set()
    t.join()
    return (b - a) / 1e3 / seconds


def first_and_again_us(call: Callable[[], object], rounds: int) -> tuple[float, float]:
    """Median CPU time of CALL made first after a second asleep, and made again at once."""
    first, again = [], []
    for _ in range(rounds):
        time.sleep(1.0)
        t0 = time.thread_time_ns()
        call()
        t1 = time.thread_time_ns()
        call()
        t2 = time.thread_time_ns()
        first.append((t1 - t0) / 1e3)
        again.append((t2 - t1) / 1e3)
    return statistics.median(first), statistics.median(again)


def read_proc_stat() -> None:
    fd = os.open("/proc/self/stat", os.O_RDONLY)
    try:
        os.read(fd, 4096)
    finally:
        os.close(fd)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    common.header(args.json)
    rounds = max(3, int(args.seconds / 2))
    res = {"idle_wake_us_per_s": idle_wake_us(args.seconds)}
    for name, call in (("stat", lambda: os.stat("/proc/self")), ("proc_read", read_proc_stat)):
        first, again = first_and_again_us(call, rounds)
        res[f"{name}_first_us"], res[f"{name}_again_us"] = first, again
        res[f"{name}_first_vs_again"] = first / max(again, 1e-3)
    common.footer(res, args.json, width=24, spec="9.1f")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
