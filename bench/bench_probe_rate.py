"""The highest sustained rate of probed calls with exact counts: a target calling one
function from K threads at once (tests/support/targets/workload.c `threads K N F`), with this
tool's latency probe (entry and return) against an empty BPF program on the same entry
and return, and no probe, in turns, in one run. Two functions: `nop5_entry` (a 5-byte nop
first, as gcc -pg -mfentry -mnop-mcount builds them: the kernel's call path where it
optimizes uprobes) and `fast_fn` (`push %rbp` first: emulated after a trap).

Where the time goes, per call: the kernel's way in and out (the empty program's cost
less its BPF run time), the empty program's BPF time, and what this tool's programs add
in the kernel (their BPF run time less the empty one's), from run-time statistics held on
for the run (BPF_ENABLE_STATS).

    sudo .venv/bin/python -m bench.bench_probe_rate [--calls 1000000] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from adaptyst_top.collectors.probes.bpf.stats import enable_run_time_stats
from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.engine.reading import bpf_run_ns
from bench import common
from bench.bench_probe_cost import EmptyProgram, ours
from tests.support.workload import Workload, build

FUNCTIONS = ("nop5_entry", "fast_fn")
THREADS = (1, 2, 4)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1_000_000, help="per thread, per run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    common.header(args.json)
    binary = build(Path(tempfile.mkdtemp(prefix="bench-rate-")))
    w = Workload(binary)
    stats_fd = enable_run_time_stats()
    res: dict[str, object] = {"kernel_optimizes": ov.kernel_optimizes_uprobes()}
    try:
        for fn in FUNCTIONS:
            command = "nop5_entry" if fn == "nop5_entry" else "fast"
            for k in THREADS:

                def rate(command: str = command, k: int = k) -> float:
                    t = time.perf_counter()
                    w.run(f"threads {k} {args.calls} {command}")
                    return float(k * args.calls / (time.perf_counter() - t))

                runs: dict[str, list[float]] = {"none": [], "empty": [], "ours": []}
                empty_bpf, ours_bpf, exact, cls = [], [], True, ""
                for _ in range(args.repeats):  # in turns: a slow spell falls on all three
                    runs["none"].append(rate())
                    empty = EmptyProgram(binary, fn, w.pid, ret=True)
                    runs["empty"].append(rate())
                    run_ns, run_cnt = ov.prog_run_stats(empty.bpf.funcs[b"nothing"].fd)
                    empty_bpf.append(2 * run_ns / max(1, run_cnt))  # entry and return
                    empty.close()
                    engine = ours(binary, w.pid, f"uprobe:{binary}:{fn}")
                    runs["ours"].append(rate())
                    engine.read()
                    (row,) = engine.snapshot_rows(False)
                    exact = exact and row.count == k * args.calls
                    cls = row.cost_class or ""
                    ours_bpf.append(bpf_run_ns(next(iter(engine.rows.values()))) or 0.0)
                    engine.close()
                med = {name: statistics.median(v) for name, v in runs.items()}
                per_call = {name: k * 1e9 / r for name, r in med.items()}  # ns a call a thread
                e_bpf, o_bpf = statistics.median(empty_bpf), statistics.median(ours_bpf)
                out = {
                    "class": cls,
                    "calls_per_s": {n: round(r) for n, r in med.items()},
                    "count_exact": exact,
                    "ours_vs_empty_rate": round(med["ours"] / med["empty"], 3),
                    "ns_per_call_per_thread": {
                        "kernel_way_in_and_out": round(
                            per_call["empty"] - per_call["none"] - e_bpf
                        ),
                        "empty_program_bpf": round(e_bpf),
                        "ours_bpf_beyond_empty": round(o_bpf - e_bpf),
                        "ours_rest": round(per_call["ours"] - per_call["empty"] - (o_bpf - e_bpf)),
                    },
                }
                res[f"{fn}_threads_{k}"] = out
                print(
                    f"{fn} x{k} ({cls}): ours {med['ours'] / 1e3:.0f} k calls/s"
                    f" (exact: {exact}), empty program {med['empty'] / 1e3:.0f} k/s,"
                    f" ratio {out['ours_vs_empty_rate']}; per call {out['ns_per_call_per_thread']}",
                    flush=True,
                )
    finally:
        os.close(stats_fd)
        w.kill()
    if args.json:
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
