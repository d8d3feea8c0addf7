"""How big a day of `record` gets: 200 probe rows at 1 s, plain JSON lines against the
zstd stream (`--out FILE.zst`) in the same run, on a synthetic 10 minutes extrapolated to
24 h (rows with moving counts, rates and ~20-bucket histograms, as a busy target gives),
and what compressing costs per interval.

    .venv/bin/python bench/bench_recording_size.py [--minutes 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adaptyst_top.collectors.snapshot import (  # noqa: E402
    DeviceReading,
    Latency,
    Overhead,
    ProbeEntry,
    Snapshot,
)
from adaptyst_top.runtime.record_file import open_output  # noqa: E402

ROWS = 200
GIB = 1 << 30


def day_of_snapshots(seconds: int) -> list[Snapshot]:
    rng = random.Random(7)
    counts = [0] * ROWS
    hists: list[dict[int, int]] = [{} for _ in range(ROWS)]
    base = [rng.uniform(180, 320) for _ in range(ROWS)]  # each row's bucket area
    out = []
    for t in range(seconds):
        probes = []
        for i in range(ROWS):
            hits = rng.randint(0, 5000) if i % 4 else 0  # a quarter of the rows idle
            counts[i] += hits
            for _ in range(min(hits, 30)):
                b = int(rng.gauss(base[i], 4))
                hists[i][b] = hists[i].get(b, 0) + hits // 30 + 1
            mean = 1000.0 * (1 + i % 17) * rng.uniform(0.95, 1.05)
            lat = Latency(mean, mean * 0.9, mean * 1.6, mean * 2.4, mean * 0.5, mean * 9)
            probes.append(
                ProbeEntry(
                    group=i // 50, id=i, spec=f"uprobe:/opt/app/bin/solver:kernel_{i // 50}*",
                    name=f"kernel_{i // 50}_step_{i}", kind="uprobe", state="attached",
                    target="/opt/app/bin/solver", cost_class="uprobe-emulated",
                    count=counts[i], rate_hz=float(hits), overhead_ns_per_hit=1546.0,
                    overhead_source="calibrated", bpf_ns_per_hit=415.1,
                    latency=Latency(*(round(v - 700, 1) for v in vars_of(lat))),
                    raw=Latency(*(round(v, 1) for v in vars_of(lat))),
                    hist=tuple(sorted(hists[i].items())),
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


def vars_of(lat: Latency) -> tuple[float, ...]:
    return tuple(
        getattr(lat, f) for f in ("mean_ns", "p50_ns", "p95_ns", "p99_ns", "min_ns", "max_ns")
    )  # type: ignore[misc]


def write(path: Path, snaps: list[Snapshot]) -> float:
    """Seconds spent writing (encoding and, for .zst, compressing) all of them."""
    f = open_output(str(path))
    spent = 0.0
    for s in snaps:
        line = json.dumps(s.to_json()) + "\n"
        t = time.perf_counter()
        f.write(line)
        f.flush()
        spent += time.perf_counter() - t
    f.close()
    return spent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    seconds = int(args.minutes * 60)
    snaps = day_of_snapshots(seconds)
    scale = 86400 / seconds
    res: dict[str, float] = {"rows": ROWS, "intervals": seconds}
    with tempfile.TemporaryDirectory() as d:
        plain, packed = Path(d) / "day.jsonl", Path(d) / "day.jsonl.zst"
        write(plain, snaps)
        zst_s = write(packed, snaps)
        res["plain_gib_per_day"] = plain.stat().st_size * scale / GIB
        res["zstd_gib_per_day"] = packed.stat().st_size * scale / GIB
        res["ratio"] = plain.stat().st_size / packed.stat().st_size
        res["zstd_ms_per_interval"] = zst_s * 1e3 / seconds
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        for k, v in res.items():
            print(f"{k:<28} {v:10.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
