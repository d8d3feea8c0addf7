"""How big a day of `record` gets: 200 probe rows at 1 s, plain JSON lines against the
zstd stream (`--out FILE.zst`) and the compact format in it (`--format compact`, the
default for .zst: each line only what changed) in the same run, on a synthetic 10 minutes extrapolated to
24 h (rows with moving counts, rates and histograms, as a busy target gives),
and what compressing costs per interval.

    .venv/bin/python -m bench.bench_recording_size [--minutes 10] [--json]

With --real-minutes M (root: real probes), a real `record` of M minutes instead: the
test workload running `forever`, probed on its functions, its USDT pair split by task,
libc's *printf* family and libc's str* functions in it (about 200 rows); its plain
JSON lines are written again as zstd and as compact zstd, and all are extrapolated
to 24 h.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from adaptyst_top.collectors.probes.cost.table import CostTable
from adaptyst_top.collectors.probes.engine.output import latency_fields
from adaptyst_top.runtime.record_file import open_output
from adaptyst_top.runtime.record_format import CompactEncoder
from adaptyst_top.snapshot import (
    DeviceReading,
    Overhead,
    ProbeEntry,
    Snapshot,
)
from adaptyst_top.snapshot.histogram import bucket_of
from bench import common

ROWS = 200
GIB = 1 << 30


def day_of_snapshots(seconds: int) -> list[Snapshot]:
    """As the engine makes them: cumulative statistics per row (count, sum, min, max, a
    log-linear histogram) and latencies from them (probe_output.latency_fields); a
    quarter of the rows idle, the rest hit 0-5000 times a second, 30 sampled values a
    second spread over a row's own latency distribution."""
    rng = random.Random(7)
    cost = CostTable().get("uprobe-emulated")
    counts, sums = [0] * ROWS, [0] * ROWS
    lows, highs = [1 << 62] * ROWS, [0] * ROWS
    hists: list[dict[int, int]] = [{} for _ in range(ROWS)]
    centre = [rng.uniform(500, 200_000) for _ in range(ROWS)]  # each row's typical ns
    out = []
    for t in range(seconds):
        probes = []
        for i in range(ROWS):
            hits = rng.randint(0, 5000) if i % 4 else 0
            counts[i] += hits
            for k in range(min(hits, 30)):
                ns = int(rng.lognormvariate(0, 0.3) * centre[i])
                weight = hits // 30 + (1 if k < hits % 30 else 0)
                b = bucket_of(ns)
                hists[i][b] = hists[i].get(b, 0) + weight
                sums[i] += ns * weight
                lows[i], highs[i] = min(lows[i], ns), max(highs[i], ns)
            net, raw, _ = latency_fields(counts[i], sums[i], lows[i], highs[i], hists[i], cost)
            probes.append(
                ProbeEntry(
                    group=i // 50, id=i, spec=f"uprobe:/opt/app/bin/solver:kernel_{i // 50}*",
                    name=f"kernel_{i // 50}_step_{i}", kind="uprobe", state="attached",
                    target="/opt/app/bin/solver", cost_class="uprobe-emulated",
                    count=counts[i], rate_hz=float(hits), overhead_ns_per_hit=1546.0,
                    overhead_source="calibrated", bpf_ns_per_hit=415.1,
                    latency=net, raw=raw, hist=tuple(sorted(hists[i].items())),
                )
            )  # fmt: skip
        cpu = DeviceReading("cpu", "cpu", "AMD EPYC", util=rng.random(), mem_used_bytes=5 << 30)
        out.append(
            Snapshot(
                t=float(t), host="node042", probes=tuple(probes), devices=(cpu,),
                overhead=Overhead(0.004, 0.02, "calibrated"),
            )
        )  # fmt: skip
    return out


def write(path: Path, snaps: list[Snapshot], compact: bool = False) -> float:
    """Seconds spent writing (encoding, for compact lines the diff, and for .zst
    compressing) all of them."""
    f = open_output(str(path))
    enc = CompactEncoder()
    spent = 0.0
    for s in snaps:
        full = s.to_json()
        t = time.perf_counter()
        if compact:
            line = json.dumps(enc.encode(full), separators=(",", ":")) + "\n"
        else:
            line = json.dumps(full) + "\n"
        f.write(line)
        f.flush()
        spent += time.perf_counter() - t
    f.close()
    return spent


def real_record(minutes: float, d: Path) -> list[Snapshot]:
    """The snapshots of a real `record` of the test workload, as its plain lines hold them."""
    from tests.support.workload import build

    binary = build(d)
    out = d / "real.jsonl"
    cli = Path(sys.executable).parent / "adaptyst-top"
    specs = [
        f"uprobe:{binary}:*_fn",
        f"usdt:{binary}:adaptyst_test:task_begin..task_end@arg1",
        "uprobe:c:*printf*",
        "uprobe:c:str*",
    ]
    argv = [str(cli), "record", "--interval", "1", "--format", "full", "--out", str(out)]
    argv += ["--duration", str(int(minutes * 60))]
    for spec in specs:
        argv += ["--probe", spec]
    # record ends the command at --duration and exits with its status (143: SIGTERM).
    subprocess.run([*argv, "--", str(binary), "forever", str(int(minutes * 60) + 120)])
    return [Snapshot.from_json(json.loads(line)) for line in out.read_text().splitlines()]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--real-minutes", type=float, default=0.0, metavar="M")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    common.header(args.json)
    if args.real_minutes > 0 and os.geteuid() != 0:
        print("bench_recording_size: --real-minutes needs root (eBPF)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as d:
        if args.real_minutes > 0:
            snaps = real_record(args.real_minutes, Path(d))
        else:
            snaps = day_of_snapshots(int(args.minutes * 60))
        return report(snaps, Path(d), args.json)


def report(snaps: list[Snapshot], d: Path, as_json: bool) -> int:
    seconds = max(1, len(snaps))
    scale = 86400 / seconds
    rows = max(len(s.probes) for s in snaps)
    res: dict[str, float] = {"rows": rows, "intervals": seconds}
    plain, packed = Path(d) / "day.jsonl", Path(d) / "day.jsonl.zst"
    write(plain, snaps)
    zst_s = write(packed, snaps)
    res["plain_gib_per_day"] = plain.stat().st_size * scale / GIB
    res["zstd_gib_per_day"] = packed.stat().st_size * scale / GIB
    res["ratio"] = plain.stat().st_size / packed.stat().st_size
    res["zstd_ms_per_interval"] = zst_s * 1e3 / seconds
    compact = Path(d) / "day-compact.zst"
    compact_s = write(compact, snaps, compact=True)
    res["compact_zstd_gib_per_day"] = compact.stat().st_size * scale / GIB
    res["compact_ratio"] = plain.stat().st_size / compact.stat().st_size
    res["compact_ms_per_interval"] = compact_s * 1e3 / seconds
    common.footer(res, as_json, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
