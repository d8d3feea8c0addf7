"""The sampled profile against perf's (`perf record -F HZ -e cpu-clock --call-graph
dwarf`), in turns, in one run, on two targets: tests/support/targets/profiled.c (built
without frame pointers; its work split between functions by construction) and xz
through liblzma, which nobody here wrote.

Per target: each function's share of the samples (total, and self for the leaves) by
both tools, and the largest difference in points; the target's throughput with each
profiler on against none (profiled.c: its own rounds per second; xz: 1 / wall time);
bytes copied per sample (perf: perf.data's size per sample; ours: the kernel's events,
headers and stacks, per event); our own CPU for unwinding per busy thread.

    sudo .venv/bin/python -m bench.bench_profile [--seconds 4] [--repeats 3] [--hz 99] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import common
from tests.support.cli import CLI
from tests.support.paths import TARGETS
from tests.support.workload import build_c

FUNCTIONS = ("outer_a", "outer_b", "heavy", "leaf")


def shares(stacks: dict[tuple[str, ...], int]) -> tuple[dict[str, float], dict[str, float]]:
    """(total, self) share of the samples per function, from stacks outermost first."""
    n = sum(stacks.values()) or 1
    total: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for frames, count in stacks.items():
        for name in set(frames):
            total[name] += count
        if frames:
            own[frames[-1]] += count
    return {k: v / n for k, v in total.items()}, {k: v / n for k, v in own.items()}


WARM_S = 2.0  # the first looks at a run's libraries are done by then (libc's: 0.1 s)


def ours(
    cmd: list[str], hz: int, work: Path
) -> tuple[dict[tuple[str, ...], int], dict[str, Any], float, str]:
    rec = work / "ours.jsonl"
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            *CLI,
            "record",
            "--profile",
            "--profile-hz",
            str(hz),
            "--interval",
            "1",
            "--out",
            str(rec),
            "--",
            *cmd,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    wall = time.monotonic() - t0
    folded = subprocess.run(
        [*CLI, "export", str(rec), "--folded"], capture_output=True, text=True, check=True
    ).stdout
    stacks: dict[tuple[str, ...], int] = {}
    for line in folded.splitlines():
        stack, _, count = line.rpartition(" ")
        stacks[tuple(stack.split(";"))] = int(count)
    lines = [json.loads(x) for x in rec.read_text().splitlines()]
    last = dict(lines[-1]["profile"])
    # After the first looks (each library's tables and symbols read once): the lines from
    # WARM_S on, which a long run's figure tends to.
    warm = [x for x in lines if x["t"] - lines[0]["t"] >= WARM_S] or lines[-1:]
    samples = last["samples"] - warm[0]["profile"]["samples"]
    busy_s = samples / hz
    last["steady_cpu_per_busy_s"] = (
        (last["cpu_s"] - warm[0]["profile"]["cpu_s"]) / busy_s if samples >= hz else None
    )
    return stacks, last, wall, proc.stdout


def perf(cmd: list[str], hz: int, work: Path) -> tuple[dict[tuple[str, ...], int], int, float, str]:
    data = work / "perf.data"
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            "perf",
            "record",
            "-q",
            "-F",
            str(hz),
            "-e",
            "cpu-clock",
            "--call-graph",
            "dwarf",
            "-o",
            str(data),
            "--",
            *cmd,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    wall = time.monotonic() - t0
    script = subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "ip,sym,dso"],
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    stacks: Counter[tuple[str, ...]] = Counter()
    frames: list[str] = []
    for line in [*script.splitlines(), ""]:
        line = line.strip()
        if not line:
            if frames:
                stacks[tuple(reversed(frames))] += 1
            frames = []
            continue
        parts = line.split(None, 1)
        rest = parts[1] if len(parts) > 1 else ""
        sym, _, dso = rest.rpartition(" (")
        sym = sym.split("+0x")[0].strip()
        if "kernel.kallsyms" in dso:
            continue  # ours unwinds user stacks: the kernel's time is its caller's
        if not sym or sym == "[unknown]":
            sym = f"[{os.path.basename(dso.rstrip(')'))}]"
        frames.append(sym)
    return dict(stacks), data.stat().st_size, wall, proc.stdout


def plain(cmd: list[str]) -> tuple[float, str]:
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    return time.monotonic() - t0, proc.stdout


def compare(a: dict[str, float], b: dict[str, float], names: list[str]) -> float:
    return max((abs(a.get(k, 0.0) - b.get(k, 0.0)) * 100 for k in names), default=0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hz", type=int, default=99)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    common.header(args.json)
    work = Path(tempfile.mkdtemp(prefix="bench-profile-"))
    os.chmod(work, 0o755)
    res: dict[str, object] = {}
    try:
        binary = build_c(TARGETS / "profiled.c", work, "-O2", "-fomit-frame-pointer", "-pthread")
        own_cmd = [str(binary), str(args.seconds)]
        data = work / "xz-input"
        with open(data, "wb") as f:  # text that compresses, from the interpreter's library
            for p in sorted(Path("/usr/lib/python3.11").glob("*.py"))[:200]:
                f.write(p.read_bytes())
        xz = shutil.which("xz") or "xz"
        # Its own time, as profiled.c says its rate: the profilers' start-up is not xz's.
        xz_cmd = [
            "sh",
            "-c",
            f"t0=$(date +%s%N); {xz} -9 -T1 -c {data} > /dev/null; t1=$(date +%s%N); "
            'echo "{\\"rounds_per_s\\": $(( 1000000000000 / (t1 - t0) ))e-3}"',
        ]
        for label, cmd in (("profiled", own_cmd), ("xz", xz_cmd)):
            rate: dict[str, list[float]] = {"none": [], "ours": [], "perf": []}
            our_stacks: Counter[tuple[str, ...]] = Counter()
            perf_stacks: Counter[tuple[str, ...]] = Counter()
            per_event, perf_bytes, cpu, steady = [], [], [], []
            for _ in range(args.repeats):
                wall, out = plain(cmd)
                rate["none"].append(_rate(out, wall))
                s, last, wall, out = ours(cmd, args.hz, work)
                rate["ours"].append(_rate(out, wall))
                our_stacks.update(s)
                per_event.append(last["copied_bytes"] / max(1, last["events"]))
                cpu.append(last["cpu_s"] / max(1e-9, last["samples"] / args.hz))
                if last["steady_cpu_per_busy_s"] is not None:
                    steady.append(last["steady_cpu_per_busy_s"])
                s, size, wall, out = perf(cmd, args.hz, work)
                rate["perf"].append(_rate(out, wall))
                perf_stacks.update(s)
                perf_bytes.append(size / max(1, sum(s.values())))
            o_total, o_self = shares(dict(our_stacks))
            p_total, p_self = shares(dict(perf_stacks))
            names = (
                list(FUNCTIONS)
                if label == "profiled"
                else [k for k, _ in Counter(p_self).most_common(8)]
            )
            res[f"{label}_total_shares_ours"] = {
                k: round(o_total.get(k, 0) * 100, 1) for k in names
            }
            res[f"{label}_total_shares_perf"] = {
                k: round(p_total.get(k, 0) * 100, 1) for k in names
            }
            res[f"{label}_self_shares_ours"] = {k: round(o_self.get(k, 0) * 100, 1) for k in names}
            res[f"{label}_self_shares_perf"] = {k: round(p_self.get(k, 0) * 100, 1) for k in names}
            res[f"{label}_max_share_diff_points_vs_perf"] = round(
                max(compare(o_total, p_total, names), compare(o_self, p_self, names)), 2
            )
            none = statistics.median(rate["none"])
            res[f"{label}_throughput_ours_vs_none"] = round(
                statistics.median(rate["ours"]) / none, 4
            )
            res[f"{label}_throughput_perf_vs_none"] = round(
                statistics.median(rate["perf"]) / none, 4
            )
            res[f"{label}_bytes_per_event_ours"] = round(statistics.median(per_event))
            res[f"{label}_bytes_per_sample_perf"] = round(statistics.median(perf_bytes))
            res[f"{label}_unwind_cpu_pct_of_core_per_busy_thread"] = round(
                statistics.median(cpu) * 100, 2
            )
            res[f"{label}_unwind_cpu_pct_after_{WARM_S:g}s"] = (
                round(statistics.median(steady) * 100, 2) if steady else None
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    common.footer(res, args.json)
    return 0


def _rate(out: str, wall: float) -> float:
    """profiled.c says its rounds per second; anything else: runs per second."""
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            return float(json.loads(line)["rounds_per_s"])
    return 1.0 / wall


if __name__ == "__main__":
    raise SystemExit(main())
