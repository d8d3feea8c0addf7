"""What timing every OpenCL kernel costs the program: a loop of short kernels on PoCL
(tests/support/targets/opencl_launches.py --loop: one 64-item kernel launched back to
back, ~10 us each here), its launches per second measured by the program itself, in one
run, interleaved, under:

- nothing (the baseline);
- the tool's layer loaded, no probe on it (a command launched with an opencl: spec
  before the probe attaches, or after it is removed);
- `record --probe 'opencl:*' --budget 100`: every launch timed on the device's clock;
- `record --probe 'opencl:*'`: every launch counted, as many timed as the default
  budget (2% of the time) allows;
- the peer: PoCL's own tracing (POCL_TRACING=text, one line a command to a file).

Each figure is the median over --repeats runs; the ratios are launches/s against the
baseline in the same run, so ≥ 0.95 means at most 5% lost. With kernels of a few µs
the runs themselves differ by tens of percent here (PoCL's two worker threads and the
program share two cores): `none_spread_pct` says how much, and a ratio within it is
noise.

    sudo .venv/bin/python -m bench.bench_opencl_kernels [--launches 20000] [--items 64]
        [--repeats 5] [--json]
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

from adaptyst_top.collectors.probes.kinds.opencl import LAYERS_ENV, layer_path
from bench import common
from tests.support.cli import CLI
from tests.support.paths import TARGETS

PROGRAM = TARGETS / "opencl_launches.py"
MODES = ("none", "layer_idle", "timed_every", "timed_default", "pocl_tracing")
RECORD = {"timed_every": ["--budget", "100"], "timed_default": []}


def one_run(mode: str, launches: int, items: int, work: Path) -> tuple[float, float | None]:
    """Launches per second of the loop under MODE, and the share of them timed."""
    out = work / f"{mode}.json"
    argv = [sys.executable, str(PROGRAM), "--loop", "--launches", str(launches), "--out", str(out)]
    argv += ["--items", str(items)]
    env = dict(os.environ)
    if mode == "layer_idle":
        env[LAYERS_ENV] = layer_path() or ""
    elif mode == "pocl_tracing":
        env["POCL_TRACING"] = "text"
    elif mode in RECORD:
        argv = [*CLI, "record", "--probe", "opencl:*", *RECORD[mode], "--", *argv]
    proc = subprocess.run(argv, env=env, cwd=work, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode}: {proc.stderr.strip()[-400:]}")
    for trace in work.glob("pocl_trace*"):  # written out now, not in the next run
        trace.unlink()
    os.sync()
    timed = None
    if mode in RECORD:
        rows = json.loads(proc.stdout.splitlines()[-1])["probes"]
        counted = sum(r["count"] for r in rows if r["name"] == "tiny")
        if counted != launches:
            raise RuntimeError(f"{mode}: {counted} launches counted of {launches}")
        timed = sum(r.get("timed") or 0 for r in rows if r["name"] == "tiny") / launches
    return float(json.loads(out.read_text())["per_s"]), timed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--items", type=int, default=64, help="work items a launch (64: ~2-3 us here)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if layer_path() is None:
        sys.exit("the OpenCL layer is not built (apt install opencl-c-headers, install again)")
    common.header(args.json)
    runs: dict[str, list[float]] = {m: [] for m in MODES}
    timed: dict[str, list[float]] = {m: [] for m in RECORD}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            # Interleaved, each round in another order: drift in the machine, and what
            # one mode leaves behind (PoCL's trace file being written out), hit every
            # mode alike.
            for mode in MODES[r % len(MODES) :] + MODES[: r % len(MODES)]:
                rate, share = one_run(mode, args.launches, args.items, Path(tmp))
                runs[mode].append(rate)
                if share is not None:
                    timed[mode].append(share)
    per_s = {m: statistics.median(v) for m, v in runs.items()}
    base = per_s["none"]
    res: dict[str, object] = {
        "launches": args.launches,
        "items": args.items,
        "repeats": args.repeats,
    }
    res |= {f"{m}_launches_per_s": round(v) for m, v in per_s.items()}
    res |= {f"{m}_share_timed": round(statistics.median(v), 4) for m, v in timed.items()}
    # The machine's own noise: how far apart the baseline's runs were, against its median.
    res["none_spread_pct"] = round(100 * (max(runs["none"]) - min(runs["none"])) / base, 1)
    res["us_per_launch_none"] = round(1e6 / base, 2)
    for m in RECORD:
        res[f"{m}_us_added_per_launch"] = round(1e6 / per_s[m] - 1e6 / base, 2)
    res |= {f"{m}_vs_none": round(per_s[m] / base, 4) for m in MODES[1:]}
    for m in RECORD:
        res[f"{m}_vs_pocl_tracing"] = round(per_s[m] / per_s["pocl_tracing"], 4)
    common.footer(res, args.json)


if __name__ == "__main__":
    main()
