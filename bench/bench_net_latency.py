"""Net latency against the function's own clock, for each kind of entry, quiet and on a
loaded node, beside bcc's funclatency on the same calls' function.

    sudo .venv/bin/python -m bench.bench_net_latency [--calls N] [--us US] [--json]

Target: tests/support/targets/workload.c, whose held_fn busy-waits US microseconds and
keeps its own durations (its clock, from inside): behind an emulated entry (held_fn's
push), a single-stepped one (held_ss: lea, then a jump to it) and a 5-byte nop
(held_nop). Loaded: 2 busy loops per core beside it. Ours: the row's net p50, mean and
minimum; funclatency: its mean (it subtracts nothing).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

from adaptyst_top.collectors.probes.cost.calibration import BackgroundCalibration
from adaptyst_top.collectors.probes.cost.table import CostTable
from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
from bench import common
from bench.bench_probe_cost import Funclatency
from tests.support.workload import Workload, build

ENTRIES = (
    ("emulated", "held", "held_fn"),
    ("stepped", "heldss", "held_ss"),
    ("nop5", "heldnop", "held_nop"),
)


def ours(
    binary: Path, costs: CostTable, command: str, fn: str, calls: int, us: int
) -> dict[str, float]:
    w = Workload(binary)
    try:
        with ProbeEngine(pid=w.pid, costs=costs) as eng:
            g = eng.add(f"uprobe:{binary}:{fn}")
            if not eng.wait(120) or g.state != "attached":
                raise RuntimeError(g.error)
            w.took()
            w.run(f"{command} {calls} {us}")
            truth = w.took()
            eng.read()
            (r,) = [x for x in eng.snapshot_rows() if x.name == fn]
        assert r.raw is not None and r.p50_ns is not None and r.mean_ns is not None
        return {
            "truth_p50_ns": truth.p50,
            "truth_mean_ns": truth.mean,
            "truth_min_ns": truth.least,
            "net_p50_ns": r.p50_ns,
            "net_mean_ns": r.mean_ns,
            "net_min_ns": r.min_ns or 0.0,
            "raw_mean_ns": r.raw.mean_ns or 0.0,
            "net_p50_vs_truth": r.p50_ns / truth.p50,
            "net_mean_vs_truth": r.mean_ns / truth.mean,
            "net_min_minus_truth_min_ns": (r.min_ns or 0.0) - truth.least,
            "class": r.cost_class,  # type: ignore[dict-item]
        }
    finally:
        w.kill()


def funclatency(binary: Path, command: str, fn: str, calls: int, us: int) -> dict[str, float]:
    w = Workload(binary)
    try:
        f = Funclatency(binary, fn, w.pid)
        w.took()
        w.run(f"{command} {calls} {us}")
        truth = w.took()
        avg = Funclatency.average_ns(f.stop()) or 0.0
        return {"funclatency_mean_vs_truth": avg / truth.mean}
    finally:
        w.kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--us", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    common.header(args.json)
    costs = CostTable()
    BackgroundCalibration(costs).wait()
    res: dict[str, object] = {
        "calibration": {k: vars(v) for k, v in costs.costs.items() if k.startswith("uprobe")}
    }
    with tempfile.TemporaryDirectory() as d:
        binary = build(Path(d))
        for load in (0, 2 * (os.cpu_count() or 1)):
            hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(load)]
            try:
                for name, command, fn in ENTRIES:
                    part = ours(binary, costs, command, fn, args.calls, args.us)
                    part |= funclatency(binary, command, fn, args.calls, args.us)
                    res[f"{'loaded' if load else 'quiet'}_{name}"] = part
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()
    common.footer(res, args.json, width=20, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
