"""Per-hit cost and accuracy of adaptyst-top's probes, side by side in one run with an
empty BPF program on the same function and with bcc's funclatency.

    sudo .venv/bin/python -m bench.bench_probe_cost [--calls N] [--json]

Target: tests/support/targets/workload.c (built here). The cost of a probe is the time per
call of the traced function with the probe minus without it, measured in the same
process, back to back; every figure is a median of --repeats runs.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from adaptyst_top.collectors.probes.bpf.stats import enable_run_time_stats
from adaptyst_top.collectors.probes.cost.calibration import BackgroundCalibration
from adaptyst_top.collectors.probes.cost.table import CostTable
from adaptyst_top.collectors.probes.engine.probe_engine import ProbeEngine
from bench import common
from tests.support.bpf_objects import loaded_programs
from tests.support.workload import Workload, build

FUNCLATENCY = shutil.which("funclatency-bpfcc") or "/usr/share/bcc/tools/funclatency"


def per_call_ns(w: Workload, command: str, n: int) -> float:
    t = time.perf_counter()
    w.run(f"{command} {n}")
    return (time.perf_counter() - t) * 1e9 / n


def median_of(repeats: int, f: Callable[[], float]) -> float:
    return statistics.median(f() for _ in range(repeats))


class EmptyProgram:
    """The floor: a BPF program that does nothing, on the same function."""

    def __init__(self, binary: Path, func: str, pid: int, ret: bool) -> None:
        from bcc import BPF  # type: ignore[import-not-found]

        self.bpf = BPF(text=b"int nothing(void *ctx) { return 0; }")
        self.bpf.attach_uprobe(name=str(binary), sym=func, fn_name=b"nothing", pid=pid)
        if ret:
            self.bpf.attach_uretprobe(name=str(binary), sym=func, fn_name=b"nothing", pid=pid)

    def close(self) -> None:
        self.bpf.cleanup()


class Funclatency:
    def __init__(self, binary: Path, func: str, pid: int) -> None:
        self.proc = subprocess.Popen(
            [FUNCLATENCY, "-p", str(pid), f"{binary}:{func}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # Its SIGINT ends it: run in the background, the bench inherits it ignored.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("Tracing"):
            raise RuntimeError(f"funclatency did not start: {line.strip()}")

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        out, _ = self.proc.communicate(timeout=30)
        return out

    @staticmethod
    def average_ns(output: str) -> float | None:
        m = re.search(r"avg = (\d+) nsecs", output)
        return float(m.group(1)) if m else None

    @staticmethod
    def p50_bucket(output: str) -> tuple[int, int] | None:
        """funclatency's log2 histogram: the bucket where the median falls."""
        rows = re.findall(r"^\s*(\d+) -> (\d+)\s*: (\d+)", output, re.M)
        total = sum(int(c) for _, _, c in rows)
        seen = 0
        for lo, hi, c in rows:
            seen += int(c)
            if seen * 2 >= total and total:
                return int(lo), int(hi)
        return None


def ours(
    binary: Path,
    pid: int,
    spec: str,
    multi: bool | None = None,
    confine: bool = False,
    oncpu: bool = True,
) -> ProbeEngine:
    """SPEC attached for PID: through a multi-uprobe link where the kernel has them (None),
    or as asked. CONFINE: as the agent attaches a user's (each hit asks whether the
    process is still theirs). ONCPU False: without the calls' on-CPU time (as before
    joules per row), to price it."""
    engine = ProbeEngine(pid=pid, multi_links=multi, confine_uid=os.getuid() if confine else None)
    if not oncpu:
        engine.builder.oncpu = None
    g = engine.add(spec)
    engine.wait(120)
    if g.state != "attached":
        raise RuntimeError(g.error)
    return engine


def cost_with(
    w: Workload, cmd: str, n: int, repeats: int, setup: Callable[[], Callable[[], None]]
) -> float:
    """Median per-call cost added by what setup() attaches (teardown it returns)."""
    results = []
    for _ in range(repeats):
        base = per_call_ns(w, cmd, n)
        teardown = setup()
        probed = per_call_ns(w, cmd, n)
        teardown()
        results.append(probed - base)
    return statistics.median(results)


def interleaved_costs(
    w: Workload, cmd: str, n: int, repeats: int, setups: dict[str, Callable[[], Callable[[], None]]]
) -> dict[str, float]:
    """Median per-call cost of each setup, measured in turns (one of each per round), so
    that the VM's slow and fast minutes fall on all of them alike."""
    results: dict[str, list[float]] = {k: [] for k in setups}
    for _ in range(repeats):
        for name, setup in setups.items():
            base = per_call_ns(w, cmd, n)
            teardown = setup()
            results[name].append(per_call_ns(w, cmd, n) - base)
            teardown()
    return {k: statistics.median(v) for k, v in results.items()}


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    common.header(args.json)
    if os.geteuid() != 0:
        print("bench_probe_cost: needs root (eBPF)", file=sys.stderr)
        return 1

    binary = build(Path(tempfile.mkdtemp()))
    w = Workload(binary)
    n, reps = args.calls, args.repeats
    res: dict[str, float | None] = {}

    def empty(ret: bool) -> Callable[[], None]:
        e = EmptyProgram(binary, "fast_fn", w.pid, ret)
        return e.close

    def funclat() -> Callable[[], None]:
        f = Funclatency(binary, "fast_fn", w.pid)

        def stop() -> None:
            f.stop()

        return stop

    def engine_for(
        spec: str, multi: bool | None = None, confine: bool = False, oncpu: bool = True
    ) -> Callable[[], Callable[[], None]]:
        def setup() -> Callable[[], None]:
            e = ours(binary, w.pid, spec, multi, confine, oncpu)
            return e.close

        return setup

    res["baseline_ns_per_call"] = median_of(reps, lambda: per_call_ns(w, "fast", n))
    res["empty_uprobe_ns"] = cost_with(w, "fast", n, reps, lambda: empty(False))
    empty_both_ns = cost_with(w, "fast", n, reps, lambda: empty(True))
    res["empty_uprobe_uretprobe_ns"] = empty_both_ns
    # Ours (through a multi-uprobe link, and one uprobe per function as on kernels before
    # 6.6) and funclatency measured in turns, 3x the repeats: the VM's slow and fast
    # minutes move every figure by more than they differ.
    ways = interleaved_costs(
        w,
        "fast",
        n,
        3 * reps,
        {
            "funclatency": funclat,
            "multi": engine_for(f"uprobe:{binary}:fast_fn", True),
            "per_function": engine_for(f"uprobe:{binary}:fast_fn", False),
            "confined": engine_for(f"uprobe:{binary}:fast_fn", True, confine=True),
            "no_oncpu": engine_for(f"uprobe:{binary}:fast_fn", True, oncpu=False),
        },
    )
    funclat_ns, ours_ns = ways["funclatency"], ways["multi"]
    res["funclatency_ns"] = funclat_ns
    res["ours_uprobe_latency_ns"] = ours_ns
    res["ours_vs_funclatency"] = ours_ns / funclat_ns
    res["ours_per_function_uprobe_latency_ns"] = ways["per_function"]
    res["ours_per_function_vs_funclatency"] = ways["per_function"] / funclat_ns
    res["ours_multi_vs_per_function"] = ours_ns / ways["per_function"]
    res["ours_confined_uprobe_latency_ns"] = ways["confined"]
    res["ours_confined_vs_unconfined"] = ways["confined"] / ours_ns
    res["ours_without_oncpu_ns"] = ways["no_oncpu"]
    res["ours_oncpu_vs_without"] = ours_ns / ways["no_oncpu"]
    res["ours_usdt_count_ns"] = cost_with(
        w, "tick", n, reps, engine_for(f"usdt:{binary}:adaptyst_test:tick")
    )
    res["ours_vs_empty_uprobe_uretprobe"] = ours_ns / empty_both_ns
    ss_n = max(2000, n // 20)
    res["empty_singlestep_uprobe_uretprobe_ns"] = cost_with(
        w, "leaf", ss_n, reps, lambda: EmptyProgram(binary, "leaf_fn", w.pid, True).close
    )
    res["ours_singlestep_latency_ns"] = cost_with(
        w, "leaf", ss_n, reps, engine_for(f"uprobe:{binary}:leaf_fn")
    )

    # In-kernel handler time per hit, from kernel.bpf_stats: free of the trap costs and
    # of the VM's noise that dominate the end-to-end figures above.
    stats_fd = enable_run_time_stats()  # held, not the sysctl: dropped however we exit

    def bpf_ns_per_hit(attach: Callable[[], Callable[[], None]], ours_only: bool) -> float:
        """The in-kernel time per hit of what ATTACH loads, over one run of fast N."""
        stop = attach()
        w.run(f"fast {n}")
        progs = [p for p in loaded_programs() if p[2] > 0 and p[0].startswith("at_") == ours_only]
        stop()
        return sum(ns / cnt for _, ns, cnt in progs)

    try:
        # In turns, median of 3x the repeats: one run's figure moves by a third here.
        runs: dict[str, list[float]] = {
            "funclatency": [],
            "multi": [],
            "per_function": [],
            "confined": [],
            "no_oncpu": [],
        }
        for _ in range(3 * reps):
            runs["funclatency"].append(bpf_ns_per_hit(funclat, False))
            runs["multi"].append(bpf_ns_per_hit(engine_for(f"uprobe:{binary}:fast_fn", True), True))
            runs["per_function"].append(
                bpf_ns_per_hit(engine_for(f"uprobe:{binary}:fast_fn", False), True)
            )
            runs["confined"].append(
                bpf_ns_per_hit(engine_for(f"uprobe:{binary}:fast_fn", True, confine=True), True)
            )
            runs["no_oncpu"].append(
                bpf_ns_per_hit(engine_for(f"uprobe:{binary}:fast_fn", True, oncpu=False), True)
            )
    finally:
        os.close(stats_fd)
    theirs_bpf, mine_bpf, per_fn_bpf = (
        statistics.median(runs[k]) for k in ("funclatency", "multi", "per_function")
    )
    res["funclatency_bpf_ns_per_hit"] = theirs_bpf
    res["ours_bpf_ns_per_hit"] = mine_bpf
    res["ours_vs_funclatency_bpf"] = mine_bpf / theirs_bpf
    res["ours_per_function_bpf_ns_per_hit"] = per_fn_bpf
    res["ours_multi_vs_per_function_bpf"] = mine_bpf / per_fn_bpf
    confined_bpf = statistics.median(runs["confined"])
    res["ours_confined_bpf_ns_per_hit"] = confined_bpf
    res["ours_confined_vs_unconfined_bpf"] = confined_bpf / mine_bpf
    without_bpf = statistics.median(runs["no_oncpu"])
    res["ours_without_oncpu_bpf_ns_per_hit"] = without_bpf
    res["ours_oncpu_vs_without_bpf"] = mine_bpf / without_bpf

    # Highest sustained hit rate with exact counts.
    e = ours(binary, w.pid, f"uprobe:{binary}:fast_fn")
    big = n * 10
    t = time.perf_counter()
    w.run(f"fast {big}")
    dt = time.perf_counter() - t
    e.read()
    count = e.snapshot_rows()[0].count
    res["max_rate_hits_per_s"] = big / dt
    res["max_rate_count_exact"] = float(count == big)
    # Toggle latency (a map write; the detach follows in the background).
    row = e.groups[0].rows[0]
    offs, ons = [], []
    for _ in range(20):
        t = time.perf_counter()
        e.set_enabled(row.id, False)
        offs.append(time.perf_counter() - t)
        e.flush()
        t = time.perf_counter()
        e.set_enabled(row.id, True)
        ons.append(time.perf_counter() - t)
    res["toggle_off_ms_max"] = max(offs) * 1e3
    res["toggle_on_ms_max"] = max(ons) * 1e3
    e.close()

    # Accuracy on a 300 us function behind a single-stepped entry (docs/data-flow.md: funclatency
    # reports a 304 us -O2 function as 337 us).
    costs = CostTable()
    BackgroundCalibration(costs).wait()
    us, calls = 300, 300

    def heldss_unprobed() -> float:
        t = time.perf_counter()
        w.run(f"heldss {calls} {us}")
        return (time.perf_counter() - t) * 1e9 / calls

    truth = median_of(reps, heldss_unprobed)
    f = Funclatency(binary, "held_ss", w.pid)
    w.run(f"heldss {calls} {us}")
    out = f.stop()
    eng = ProbeEngine(pid=w.pid, costs=costs)
    g = eng.add(f"uprobe:{binary}:held_ss")
    eng.wait(120)
    assert g.state == "attached", g.error
    w.run(f"heldss {calls} {us}")
    eng.read()
    r = eng.snapshot_rows()[0]
    eng.close()
    res["heldss_truth_ns"] = truth
    res["heldss_funclatency_avg_ns"] = Funclatency.average_ns(out)
    lo_hi = Funclatency.p50_bucket(out)
    res["heldss_funclatency_p50_bucket_lo_ns"] = lo_hi[0] if lo_hi else None
    res["heldss_funclatency_p50_bucket_hi_ns"] = lo_hi[1] if lo_hi else None
    res["heldss_ours_raw_mean_ns"] = r.raw.mean_ns if r.raw else None
    res["heldss_ours_net_mean_ns"] = r.mean_ns
    res["heldss_ours_net_p50_ns"] = r.p50_ns
    res["calibration"] = costs.costs[r.cost_class or ""].source  # type: ignore[assignment]
    w.kill()

    common.footer(res, args.json, width=42, spec=">14.3f")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
