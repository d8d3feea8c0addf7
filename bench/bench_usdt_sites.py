"""A USDT begin..end pair on 5-byte nop sites (the kernel turns the probe into a call)
against the same pair on sys/sdt.h's 1-byte nops (a trap on every hit), in one run,
with this tool's own probe programs: the calibration's measurement (calibrate.c's
`pair` and `pair5`, the time per call with the probe minus without it, the fastest of
its repeats), taken --runs times afresh; and, as the floor, the same sites with an
empty BPF program (one count per hit, plain bcc), where only the path into the
kernel differs.

    sudo .venv/bin/python bench/bench_usdt_sites.py [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from adaptyst_top.collectors.probes import overhead as ov
from adaptyst_top.collectors.probes.calibration import build_calibrator, calibrate
from adaptyst_top.collectors.probes.helper_build import HelperProcess

CLASSES = (ov.USDT, ov.USDT_OPTIMIZED, ov.USDT_PAIR, ov.USDT_PAIR_OPTIMIZED)


def empty_program(calls: int = 30000, repeats: int = 5) -> dict[str, float]:
    """ns per call added by an empty program on `pair` and `pair5`'s two sites each."""
    from bcc import BPF, USDT

    target = HelperProcess(build_calibrator())
    try:
        u = USDT(pid=target.proc.pid)
        text = "BPF_ARRAY(hits, u64, 1);\n"
        for probe in ("begin", "end", "begin5", "end5"):
            u.enable_probe(probe=probe, fn_name=f"on_{probe}")
            text += (
                f"int on_{probe}(struct pt_regs *ctx) {{ int k = 0; u64 *v = hits.lookup(&k);"
                " if (v) __sync_fetch_and_add(v, 1); return 0; }\n"
            )
        bpf = BPF(text=text, usdt_contexts=[u])
        try:
            probed = {
                fn: min(float(target.ask(f"{fn} {calls}")) for _ in range(repeats))
                for fn in ("pair", "pair5")
            }
        finally:
            bpf.cleanup()
        bare = {
            fn: min(float(target.ask(f"{fn} {calls}")) for _ in range(repeats))
            for fn in ("pair", "pair5")
        }
    finally:
        target.close()
    return {fn: round(probed[fn] - bare[fn], 1) for fn in probed}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runs: dict[str, list[float]] = {c: [] for c in CLASSES}
    for i in range(args.runs):
        table = calibrate()
        for c in CLASSES:
            runs[c].append(table.costs[c].per_hit_ns)
        print(f"run {i + 1}: " + ", ".join(f"{c} {runs[c][-1]:.0f} ns" for c in CLASSES))
    median = {c: statistics.median(v) for c, v in runs.items()}
    empty = empty_program()
    print(f"empty program: pair {empty['pair']:.0f} ns, pair5 {empty['pair5']:.0f} ns")
    out = {
        "kernel_optimizes": ov.kernel_optimizes_uprobes(),
        "per_hit_ns": runs,
        "median_ns": median,
        "hit_ratio": round(median[ov.USDT_OPTIMIZED] / median[ov.USDT], 3),
        "pair_ratio": round(median[ov.USDT_PAIR_OPTIMIZED] / median[ov.USDT_PAIR], 3),
        "empty_program_ns": empty,
        "empty_program_pair_ratio": round(empty["pair5"] / empty["pair"], 3),
        "pair_ratios": [
            round(o / p, 3)
            for o, p in zip(runs[ov.USDT_PAIR_OPTIMIZED], runs[ov.USDT_PAIR], strict=True)
        ],
    }
    print(f"pair on 5-byte nops / on 1-byte nops: {out['pair_ratio']} (median of {args.runs})")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
