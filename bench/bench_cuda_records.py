"""What the `cuda:` injection library costs per CUPTI record: a program on CUPTI's fake
(tests/support/cuda_fake.py: no GPU here) writes --launches kernel records, plus a copy
there and back and a memset every 50, and times itself from its first launch until a
forced flush has handed every record back. In one run, interleaved, under:

- `cupti_alone` (the peer): the injection library loaded, no probe on it; CUPTI's
  records are written and their buffers handed back unread, which is the least any
  CUPTI activity tool pays;
- `record --probe 'cuda:*' --budget 100`: every record filed timed;
- `record --probe 'cuda:*' --budget 0.001`: every record counted, almost none timed;
- `record --probe 'cuda:*'`: the default budget (2% of the time).

The figures are ns added per record against the peer (median of --repeats): of the
program's wall time (the filing runs on CUPTI's thread, off the launching one) and of
its CPU time, all threads (what the overhead pane's classes cuda-record and cuda-count
charge). Against a real GPU the
program's own cost per launch is microseconds and CUPTI's driver-side cost is its own;
neither is measured here.

    sudo .venv/bin/python -m bench.bench_cuda_records [--launches 200000] [--repeats 5]
        [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from adaptyst_top.collectors.probes.kinds.cuda import INJECTION_ENV, inject_path
from bench import common
from tests.support.cli import CLI
from tests.support.cuda_fake import build_app

MODES = ("cupti_alone", "timed_every", "counted", "timed_default")
RECORD = {"timed_every": ["--budget", "100"], "counted": ["--budget", "0.001"], "timed_default": []}


def one_run(
    mode: str, app: Path, launches: int, work: Path
) -> tuple[float, float, int, float | None]:
    """Seconds and CPU seconds of the program under MODE, its records, and the share of
    them timed."""
    out = work / f"{mode}.json"
    argv = [str(app), "--launches", str(launches), "--out", str(out)]
    env = dict(os.environ)
    if mode == "cupti_alone":
        env[INJECTION_ENV] = inject_path() or ""
    else:
        argv = [*CLI, "record", "--probe", "cuda:*", *RECORD[mode], "--", *argv]
    proc = subprocess.run(argv, env=env, cwd=work, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode}: {proc.stderr.strip()[-400:]}")
    own = json.loads(out.read_text())
    records = sum(own["launches"].values())
    timed = None
    if mode in RECORD:
        rows = json.loads(proc.stdout.splitlines()[-1])["probes"]
        counted = sum(r["count"] for r in rows)
        if counted != records:
            raise RuntimeError(f"{mode}: {counted} records counted of {records}")
        timed = sum(r.get("timed") or 0 for r in rows) / records
    return float(own["seconds"]), float(own["cpu_seconds"]), records, timed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--launches", type=int, default=200000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if inject_path() is None:
        sys.exit("the CUDA injection library is not built (CUPTI's headers: install again)")
    common.header(args.json)
    runs: dict[str, list[float]] = {m: [] for m in MODES}
    cpu: dict[str, list[float]] = {m: [] for m in MODES}
    timed: dict[str, list[float]] = {m: [] for m in RECORD}
    records = 0
    with tempfile.TemporaryDirectory() as tmp:
        app = build_app(Path(tmp))
        for r in range(args.repeats):
            for mode in MODES[r % len(MODES) :] + MODES[: r % len(MODES)]:
                seconds, cpu_s, records, share = one_run(mode, app, args.launches, Path(tmp))
                runs[mode].append(seconds)
                cpu[mode].append(cpu_s)
                if share is not None:
                    timed[mode].append(share)
    med = {m: statistics.median(v) for m, v in runs.items()}
    med_cpu = {m: statistics.median(v) for m, v in cpu.items()}
    base, base_cpu = med["cupti_alone"], med_cpu["cupti_alone"]
    res: dict[str, object] = {
        "launches": args.launches,
        "records": records,
        "repeats": args.repeats,
    }
    res["cupti_alone_ns_per_record"] = round(1e9 * base / records, 1)
    res["cupti_alone_spread_pct"] = round(
        100 * (max(runs["cupti_alone"]) - min(runs["cupti_alone"])) / base, 1
    )
    for m in RECORD:
        res[f"{m}_ns_added_per_record"] = round(1e9 * (med[m] - base) / records, 1)
        res[f"{m}_cpu_ns_added_per_record"] = round(1e9 * (med_cpu[m] - base_cpu) / records, 1)
        res[f"{m}_share_timed"] = round(statistics.median(timed[m]), 4)
    common.footer(res, args.json)


if __name__ == "__main__":
    main()
