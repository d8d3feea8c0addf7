"""What timing every OpenCL kernel costs the program: a loop of short kernels on PoCL
(tests/support/targets/opencl_launches.py --loop: one 64-item kernel launched back to
back, ~10 us each here), its launches per second measured by the program itself, in one
run, interleaved, under:

- nothing (the baseline);
- the tool's layer loaded, no probe on it (a command launched with an opencl: spec
  before the probe attaches, or after it is removed);
- `record --probe 'opencl:*'`: every launch timed on the device's clock;
- the peer: PoCL's own tracing (POCL_TRACING=text, one line a command to a file).

Each figure is the median over --repeats runs; the ratios are launches/s against the
baseline in the same run, so ≥ 0.95 means at most 5% lost.

    sudo .venv/bin/python -m bench.bench_opencl_kernels [--launches 20000] [--repeats 5] [--json]
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
MODES = ("none", "layer_idle", "timed", "pocl_tracing")


def one_run(mode: str, launches: int, work: Path) -> float:
    """Launches per second of the loop under MODE."""
    out = work / f"{mode}.json"
    argv = [sys.executable, str(PROGRAM), "--loop", "--launches", str(launches), "--out", str(out)]
    env = dict(os.environ)
    if mode == "layer_idle":
        env[LAYERS_ENV] = layer_path() or ""
    elif mode == "pocl_tracing":
        env["POCL_TRACING"] = "text"
    elif mode == "timed":
        argv = [*CLI, "record", "--probe", "opencl:*", "--", *argv]
    proc = subprocess.run(argv, env=env, cwd=work, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode}: {proc.stderr.strip()[-400:]}")
    if mode == "timed":
        rows = json.loads(proc.stdout.splitlines()[-1])["probes"]
        counted = sum(r["count"] for r in rows if r["name"] == "tiny")
        if counted != launches:
            raise RuntimeError(f"timed: {counted} launches counted of {launches}")
    return float(json.loads(out.read_text())["per_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if layer_path() is None:
        sys.exit("the OpenCL layer is not built (apt install opencl-c-headers, install again)")
    common.header(args.json)
    runs: dict[str, list[float]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for mode in MODES:  # interleaved: drift in the machine hits every mode alike
                runs[mode].append(one_run(mode, args.launches, Path(tmp)))
    per_s = {m: statistics.median(v) for m, v in runs.items()}
    base = per_s["none"]
    res: dict[str, object] = {"launches": args.launches, "repeats": args.repeats}
    res |= {f"{m}_launches_per_s": round(v) for m, v in per_s.items()}
    res["us_per_launch_none"] = round(1e6 / base, 2)
    res["timed_us_added_per_launch"] = round(1e6 / per_s["timed"] - 1e6 / base, 2)
    res |= {f"{m}_vs_none": round(per_s[m] / base, 4) for m in MODES[1:]}
    res["timed_vs_pocl_tracing"] = round(per_s["timed"] / per_s["pocl_tracing"], 4)
    common.footer(res, args.json)


if __name__ == "__main__":
    main()
