"""Probes on 5-byte nops (the kernel turns the probe into a call) against the same probes
on what traps, in one run, with this tool's own probe programs: a USDT begin..end pair on
5-byte sites against sys/sdt.h's 1-byte nops, and a function's entry+return probe on a
5-byte nop (gcc -pg -mfentry -mnop-mcount) against one on `push %rbp` (emulated), and
behind an endbr64 (probed past it, on the nop) against a bare endbr64 (single-stepped).
Each is the calibration's measurement (calibrate.c, the time per call with the probe
minus without it, the fastest of its repeats), taken --runs times afresh; and, as the
floor, the same sites with an empty BPF program (one count per hit, plain bcc), where
only the path into the kernel differs.

    sudo .venv/bin/python -m bench.bench_usdt_sites [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.cost.calibration import PLAN as CALIBRATION_PLAN
from adaptyst_top.collectors.probes.cost.calibration import build_calibrator, calibrate
from adaptyst_top.collectors.probes.helpers.build import HelperProcess
from bench import common

ENDBR, ENDBR_NOP5 = "endbr64 (single-stepped)", "endbr64; nop5 (probed on the nop)"
PLAN = (
    *CALIBRATION_PLAN,
    (ENDBR, "endbr", "uprobe:{bin}:cal_endbr", 6000),
    (ENDBR_NOP5, "endbr_nop5", "uprobe:{bin}:cal_endbr_nop5", 40000),
)
CLASSES = tuple(cls for cls, *_ in PLAN)
# What is compared: (faster, slower) in each pair.
PAIRS = {
    "hit": (ov.USDT_OPTIMIZED, ov.USDT),
    "pair": (ov.USDT_PAIR_OPTIMIZED, ov.USDT_PAIR),
    "function": (ov.UPROBE_OPTIMIZED, ov.EMULATED),
    "function_endbr": (ENDBR_NOP5, ENDBR),
}


def empty_program(calls: int = 30000, repeats: int = 5) -> dict[str, float]:
    """ns per call added by an empty program: on `pair` and `pair5`'s two sites each, and
    on the entry and return of `push` and `nop5`."""
    from bcc import BPF, USDT

    binary = build_calibrator()
    target = HelperProcess(binary)
    fns = ("pair", "pair5", "push", "nop5")
    try:
        u = USDT(pid=target.proc.pid)
        text = "BPF_ARRAY(hits, u64, 1);\n"
        handlers = ["begin", "end", "begin5", "end5", "entry", "ret"]
        for probe in handlers[:4]:
            u.enable_probe(probe=probe, fn_name=f"on_{probe}")
        for h in handlers:
            text += (
                f"int on_{h}(struct pt_regs *ctx) {{ int k = 0; u64 *v = hits.lookup(&k);"
                " if (v) __sync_fetch_and_add(v, 1); return 0; }\n"
            )
        bpf = BPF(text=text, usdt_contexts=[u])
        try:
            for sym in ("cal_push", "cal_nop5"):
                bpf.attach_uprobe(name=str(binary), sym=sym, fn_name="on_entry")
                bpf.attach_uretprobe(name=str(binary), sym=sym, fn_name="on_ret")
            probed = {
                fn: min(float(target.ask(f"{fn} {calls}")) for _ in range(repeats)) for fn in fns
            }
        finally:
            bpf.cleanup()
        bare = {fn: min(float(target.ask(f"{fn} {calls}")) for _ in range(repeats)) for fn in fns}
    finally:
        target.close()
    return {fn: round(probed[fn] - bare[fn], 1) for fn in probed}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    common.header(args.json)
    runs: dict[str, list[float]] = {c: [] for c in CLASSES}
    for i in range(args.runs):
        table = calibrate(plan=PLAN)
        for c in CLASSES:
            runs[c].append(table.costs[c].per_hit_ns)
        print(f"run {i + 1}: " + ", ".join(f"{c} {runs[c][-1]:.0f} ns" for c in CLASSES))
    median = {c: statistics.median(v) for c, v in runs.items()}
    empty = empty_program()
    print("empty program: " + ", ".join(f"{fn} {ns:.0f} ns" for fn, ns in empty.items()))
    ratios = {k: round(median[a] / median[b], 3) for k, (a, b) in PAIRS.items()}
    out = {
        "kernel_optimizes": ov.kernel_optimizes_uprobes(),
        "per_hit_ns": runs,
        "median_ns": median,
        "ratios": ratios,
        "run_ratios": {
            k: [round(x / y, 3) for x, y in zip(runs[a], runs[b], strict=True)]
            for k, (a, b) in PAIRS.items()
        },
        "empty_program_ns": empty,
        "empty_program_ratios": {
            "pair": round(empty["pair5"] / empty["pair"], 3),
            "function": round(empty["nop5"] / empty["push"], 3),
        },
    }
    for k, r in ratios.items():
        print(f"{k}: on 5-byte nops / trapping: {r} (median of {args.runs})")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
