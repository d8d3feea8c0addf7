#!/usr/bin/env python3
"""Placement on Dask against its two anchors, in one run, on real worker processes
bound to 127.0.0.1: one worker offering an accelerator (--accelerator: PoCL's OpenCL
device by default, or `cuda`, an NVIDIA GPU through cupy), one the CPU alone.

The workload is ROUNDS rounds of the logistic map (placement/kernels.py) on a mix of
small and large inputs, each round submitted with client.map and gathered. Three ways
of running the same rounds, each on a fresh cluster:

- cpu:    the CPU variant alone, plain Dask (what a user who wrote one variant gets);
- oracle: each input size on one device, known in advance, plus, in the first round,
          one look at the other device for each size (the least any learner spends):
          every such assignment is run, and the fastest counts (the devices' speeds
          alone, calibrated apart, miss what running beside each other costs);
- placed: `placed(...)` with DevicePlacement: learned live, from nothing.

Reported: the wall time of each, `cpu_vs_placed` (how many times faster placed is than
the CPU variant alone) and `placed_vs_oracle` (how much slower than the oracle), with
the scheduler's placing cost per task, measured in the run and for 1,000 simulated
workers (the plugin's update_graph, and its transition hook taking each run's report
from the task-finished message, on a scheduler-shaped object).

    .venv/bin/python -m bench.dask_eval [--rounds 30] [--accelerator cuda] [--json]
"""

from __future__ import annotations

import argparse
import atexit
import itertools
import json
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
from distributed import Client, Nanny, Scheduler, SpecCluster

from adaptyst_top.dask import DevicePlacement, placement_report
from adaptyst_top.dask import demo_kernels as dk
from adaptyst_top.dask.placed import ANNOTATION, METADATA, VERSION
from adaptyst_top.placement.task_keys import size_bucket as dw_bucket
from bench import dask_workloads as dw

SCRATCH = tempfile.mkdtemp(prefix="adt-dask-eval-")


@dataclass(frozen=True)
class Workload:
    task: Any  # the placed task
    variants: dict[str, Any]  # kind -> its variant (the accelerator's chosen at run time)
    small: int
    large: int
    warm: bool  # the accelerator set up before the first task (else by its first call)


WORKLOADS = {
    "logistic": Workload(dk.logistic, dk.VARIANTS, 2_000, 1_000_000, True),
    "poly": Workload(dw.poly, dw.POLY, 64, 50_000, False),
    "stencil": Workload(dw.stencil, dw.STENCIL, 64, 50_000, False),
}
atexit.register(shutil.rmtree, SCRATCH, True)


def start_cluster(accelerator: str, warm: bool = True) -> tuple[Any, Any, list[str]]:
    def worker(resources: dict[str, float]) -> dict[str, Any]:
        # Scratch space of its own (mkdtemp: 0700), not Dask's guessable /tmp default.
        options = {
            "host": "127.0.0.1",
            "nthreads": 1,
            "dashboard_address": None,
            "local_directory": SCRATCH,
        }
        return {"cls": Nanny, "options": {**options, "resources": resources}}

    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard_address": None}}
    workers = {"gpu": worker({accelerator: 1}), "plain": worker({"cpu": 1})}
    cluster = SpecCluster(workers=workers, scheduler=scheduler, silence_logs=40)  # type: ignore[no-untyped-call]
    client = Client(cluster)  # type: ignore[no-untyped-call]
    info = client.scheduler_info()["workers"]
    offering = [a for a, w in info.items() if w["resources"].get(accelerator)]
    if warm:
        client.run(dk.warm, accelerator, workers=offering)
    return cluster, client, offering


def rounds_of(sizes: list[int], rounds: int, seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [[(0.05 + 0.9 * rng.random(n, dtype=np.float32)) for n in sizes] for _ in range(rounds)]


def variants(w: Workload, accelerator: str) -> dict[str, Any]:
    return {k: w.variants[k] for k in ("cpu", accelerator)}


def calibrate(
    client: Any, offering: list[str], sizes: list[int], accelerator: str, w: Workload
) -> dict[int, dict[str, float]]:
    """Each size's median time on each device, on the workers (untimed in the totals)."""

    def median_ms(fn: Any, n: int) -> float:
        rng = np.random.default_rng(9)
        times = []
        for _ in range(5):
            x = 0.05 + 0.9 * rng.random(n, dtype=np.float32)
            start = time.perf_counter()
            fn(x)
            times.append(time.perf_counter() - start)
        return 1e3 * statistics.median(times)

    out: dict[int, dict[str, float]] = {}
    for n in sorted(set(sizes)):
        out[n] = {
            kind: client.submit(median_ms, fn, n, workers=offering, pure=False).result()
            for kind, fn in variants(w, accelerator).items()
        }
    return out


def run_cpu(client: Any, work: list[list[np.ndarray]], w: Workload) -> float:
    start = time.perf_counter()
    for xs in work:
        client.gather(client.map(w.variants["cpu"], xs, pure=False))
    return time.perf_counter() - start


def run_oracle(
    client: Any, work: list[list[np.ndarray]], best: dict[int, str], accelerator: str, w: Workload
) -> float:
    start = time.perf_counter()
    for i, xs in enumerate(work):
        looked: set[int] = set()
        futures = []
        for x in xs:
            kind = best[len(x)]
            if i == 0 and len(x) not in looked:  # one look at the slower device
                looked.add(len(x))
                kind = "cpu" if kind == accelerator else accelerator
            resources = {accelerator: 1} if kind == accelerator else None
            futures.append(client.submit(w.variants[kind], x, resources=resources, pure=False))
        client.gather(futures)
    return time.perf_counter() - start


def run_placed(
    client: Any, work: list[list[np.ndarray]], objective: str, w: Workload
) -> tuple[float, Any]:
    client.register_plugin(DevicePlacement(objective))
    start = time.perf_counter()
    for xs in work:
        client.gather(client.map(w.task, xs, pure=False))
    took = time.perf_counter() - start
    return took, placement_report(client)


def simulated_cost(workers: int, tasks: int) -> dict[str, float]:
    """µs per task of the plugin's update_graph and learning with WORKERS workers (a
    scheduler-shaped object: the plugin reads workers' resources and tasks' specs)."""
    plugin = DevicePlacement("time")
    res = [{"opencl": 1} if i % 4 == 0 else {} for i in range(workers)]
    ws = {
        f"tcp://10.0.{i // 250}.{i % 250}:1": SimpleNamespace(
            resources=r, host=f"10.0.{i // 250}.{i % 250}"
        )
        for i, r in enumerate(res)
    }
    rng = np.random.default_rng(0)
    sizes = [int(n) for n in rng.choice([2_000, 1_000_000], size=tasks)]
    specs = {
        f"logistic-{i}": SimpleNamespace(
            func=dk.logistic, args=(np.empty(n, np.float32),), kwargs={}, dependencies=set()
        )
        for i, n in enumerate(sizes)
    }
    tasks_ = {
        k: SimpleNamespace(
            run_spec=s,
            annotations={},
            dependencies=set(),
            resource_restrictions=None,
            loose_restrictions=True,
        )
        for k, s in specs.items()
    }
    index: dict[str, dict[str, float]] = {}
    for address, w in ws.items():
        for kind, n in w.resources.items():
            index.setdefault(kind, {})[address] = n
    scheduler = SimpleNamespace(workers=ws, tasks=tasks_, unrunnable={}, resources=index)
    plugin.scheduler = scheduler
    start = time.perf_counter_ns()
    for key in tasks_:  # one graph per call, as client.submit sends them
        plugin.update_graph(scheduler, tasks=[key])
    placed_ns = (time.perf_counter_ns() - start) / tasks
    addresses = list(ws)
    start = time.perf_counter_ns()
    for i, (key, ts) in enumerate(tasks_.items()):
        p = ts.annotations[ANNOTATION]
        t = 1e-3 if p["kind"] == "opencl" and p["size"] > 10_000 else 2e-3
        run = {"v": VERSION, "t": t, "e": None, "how": None}  # as the worker reports it
        plugin.transition(
            key, "processing", "memory", worker=addresses[i % workers], metadata={METADATA: run}
        )
    learned_ns = (time.perf_counter_ns() - start) / tasks
    return {"place_us": round(placed_ns / 1e3, 2), "learn_us": round(learned_ns / 1e3, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="logistic")
    ap.add_argument("--small", type=int, default=None, help="elements of a small input")
    ap.add_argument("--large", type=int, default=None, help="elements of a large input")
    ap.add_argument("--per-round", type=int, default=4, help="inputs of each size per round")
    ap.add_argument("--objective", default="time")
    ap.add_argument("--accelerator", choices=("opencl", "cuda"), default="opencl")
    ap.add_argument("--json", action="store_true", help="end with one JSON line of figures")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="Sending large graph")
    w = WORKLOADS[args.workload]
    small, large = args.small or w.small, args.large or w.large
    sizes = [small, large] * args.per_round
    work = rounds_of(sizes, args.rounds, seed=1)
    out: dict[str, Any] = {
        "workload": args.workload,
        "rounds": args.rounds,
        "tasks_per_round": len(sizes),
        "sizes": [small, large],
        "accelerator": args.accelerator,
        "warmed_ahead": w.warm,
    }

    def fresh() -> tuple[Any, Any, list[str]]:
        # A lazily set up accelerator is set up by each run's first call there: every
        # run (the oracle's too) on a cluster of its own pays it.
        return start_cluster(args.accelerator, w.warm)

    cluster, client, offering = fresh()
    try:
        calib = calibrate(client, offering, sizes, args.accelerator, w)
        out["calibration_ms"] = {
            str(n): {k: round(v, 3) for k, v in t.items()} for n, t in calib.items()
        }
        if w.warm:
            out["cpu_s"] = round(run_cpu(client, work, w), 3)
    finally:
        client.close()
        cluster.close()
    if not w.warm:
        cluster, client, _ = fresh()
        try:
            out["cpu_s"] = round(run_cpu(client, work, w), 3)
        finally:
            client.close()
            cluster.close()
    statics = {}
    cluster, client, _ = fresh()
    try:
        for kinds in itertools.product(variants(w, args.accelerator), repeat=2):
            if not w.warm:
                client.close()
                cluster.close()
                cluster, client, _ = fresh()
            best = dict(zip((small, large), kinds, strict=True))
            took = run_oracle(client, work, best, args.accelerator, w)
            statics["/".join(kinds)] = round(took, 3)
    finally:
        client.close()
        cluster.close()
    out["static_s"] = statics  # small/large on: each assignment, with its looks
    out["best"] = min(statics, key=lambda k: statics[k])
    out["oracle_s"] = statics[out["best"]]
    cluster, client, _ = fresh()
    try:
        took, report = run_placed(client, work, args.objective, w)
    finally:
        client.close()
        cluster.close()
    out["placed_s"] = round(took, 3)
    out["cpu_vs_placed"] = round(out["cpu_s"] / took, 3)
    out["placed_vs_oracle"] = round(took / out["oracle_s"], 3)
    out["oracle_vs_cpu"] = round(out["cpu_s"] / out["oracle_s"], 3)
    out["place_us_per_task"] = report["place_us_per_task"]
    out["chosen"] = {str(r["size_bucket"]): r["device"] for r in report["tasks"]}
    out["runs"] = {str(r["size_bucket"]): r["runs"] for r in report["tasks"]}
    # The calls placed on a size's slower device (by the calibration), as the report
    # names them: the looks and what learning cost.
    slower = {n: max(t, key=lambda k: t[k]) for n, t in calib.items()}
    out["calls_on_slower"] = {
        str(r["size_bucket"]): sum(
            v for k, v in r["runs"].items() for n in (small, large)
            if dw_bucket(n) == r["size_bucket"] and k == slower[n]
        )
        for r in report["tasks"]
    }  # fmt: skip
    out["simulated_1000_workers"] = simulated_cost(1000, 5000)
    for key in (
        "cpu_s",
        "oracle_s",
        "placed_s",
        "cpu_vs_placed",
        "placed_vs_oracle",
        "oracle_vs_cpu",
        "place_us_per_task",
    ):
        print(f"{key:>20}: {out[key]}")
    print(f"{'chosen / best':>20}: {out['chosen']} / {out['best']}")
    print(f"{'runs':>20}: {out['runs']} (on the slower: {out['calls_on_slower']})")
    print(f"{'1,000 workers':>20}: {out['simulated_1000_workers']}")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
