"""From `adaptyst-top record ... -- CMD` to CMD's first instruction, beside `perf record`
starting the same command, in the same run: no probe, one uprobe spec, and `--profile`
(beside `perf record -F 99 --call-graph dwarf`). CMD prints CLOCK_REALTIME as its first
act; the gap from the moment before the launcher was spawned is the figure. Medians of
ROUNDS, the launchers interleaved so that a busy moment hits each alike, after one
round unmeasured. The tool runs from its compiled bytecode, as an installed wheel does
(PYTHONDONTWRITEBYTECODE is dropped: a shell that sets it compiles every module at every
start, +0.1-0.2 s here).

    sudo .venv/bin/python -m bench.bench_launch [--rounds 7] [--json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import common

_TARGET = r"""
#include <stdio.h>
#include <time.h>
__attribute__((noinline)) int work(int x) { return x * 2; }
int main(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    printf("%ld.%09ld\n", (long)t.tv_sec, t.tv_nsec);
    int s = 0;
    for (int i = 0; i < 1000; i++) s += work(i);
    return s == 0;
}
"""


def build(folder: Path) -> Path:
    src, exe = folder / "first.c", folder / "first"
    src.write_text(_TARGET)
    subprocess.run(["gcc", "-O1", "-g", "-o", str(exe), str(src)], check=True)
    return exe


def gap_s(argv: list[str]) -> float:
    """Seconds from before ARGV was spawned to its command's first clock reading."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    t0 = time.time()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    first = next((ln for ln in out.stdout.splitlines() if ln[:1].isdigit()), None)
    if first is None:
        raise RuntimeError(f"{argv[0]}: no start time: {out.stderr.strip()[-300:]}")
    return float(first) - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    common.header(args.json)
    tool = [sys.executable, "-m", "adaptyst_top.cli.start", "record", "--duration", "1"]
    perf = shutil.which("perf")
    with tempfile.TemporaryDirectory() as d:
        exe = build(Path(d))
        cmd = ["--", str(exe)]
        out = ["--out", str(Path(d) / "rec.jsonl")]
        cases = {
            "tool_none_s": [*tool, *out, *cmd],
            "tool_uprobe_s": [*tool, *out, "--probe", f"uprobe:{exe}:work", *cmd],
            "tool_profile_s": [*tool, *out, "--profile", *cmd],
        }
        if perf:
            data = str(Path(d) / "perf.data")
            cases["perf_s"] = [perf, "record", "-q", "-o", data, *cmd]
            dwarf = ["-F", "99", "--call-graph", "dwarf"]
            cases["perf_dwarf_s"] = [perf, "record", "-q", *dwarf, "-o", data, *cmd]
        seen: dict[str, list[float]] = {k: [] for k in cases}
        for argv in cases.values():  # the bytecode written, the files in the page cache
            gap_s(argv)
        for _ in range(args.rounds):
            for name, argv in cases.items():
                seen[name].append(gap_s(argv))
    res: dict[str, object] = {k: statistics.median(v) for k, v in seen.items()}
    if perf:
        res["uprobe_vs_perf_ratio"] = float(res["tool_uprobe_s"]) / float(res["perf_s"])  # type: ignore[arg-type]
        res["profile_vs_perf_dwarf_ratio"] = float(res["tool_profile_s"]) / float(  # type: ignore[arg-type]
            res["perf_dwarf_s"]  # type: ignore[arg-type]
        )
    common.footer(res, args.json)


if __name__ == "__main__":
    main()
