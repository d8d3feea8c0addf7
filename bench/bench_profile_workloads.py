"""The profile on the newcomer's five workloads (xz, gzip, sqlite3, numpy's BLAS, pure
Python), against `perf record -F HZ --call-graph dwarf` and, on the Python ones,
`py-spy record --native` where py-spy is installed: in turns (none, ours, perf, py-spy),
REPEATS times, paired within each round.

Per workload and tool: the target's own CPU (its process tree's user + system, from
bash's `times` around it: a profiler's kernel work in the target's context counts), that
over the target's CPU with no profiler, the tool's own CPU as a share of a core over the
run (its process tree's CPU less the target's), and the top-5 self shares (leaf
functions; a frame with no symbol is its file, `[liblzma.so.5]`, named so by both) with
the largest difference from perf's, in points.

    sudo .venv/bin/python -m bench.bench_profile_workloads [--repeats 3] [--hz 99] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.bench_profile import ours, perf

PY_SPIN = "def f(n):\n s=0\n for i in range(n): s+=i*i%7\n return s\nf(60_000_000)\n"
NUMPY = (
    "import numpy as np\nrng=np.random.default_rng(1)\na=rng.random((700,700))\n"
    "for _ in range(330): a=(a@a)/700.0\n"
)
SQL = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<10000000)"
    " SELECT sum(x*x % 7), count(DISTINCT x % 1000) FROM c;"
)


def _data(path: Path, mb: int) -> Path:
    """Text that compresses like prose: words drawn from a fixed vocabulary."""
    if not path.exists():
        rnd = random.Random(7)
        words = ["".join(rnd.choices("abcdefghijklmnopqrstuvwxyz", k=rnd.randint(2, 9)))
                 for _ in range(5000)]  # fmt: skip
        with path.open("w") as f:
            while f.tell() < mb << 20:
                f.write(" ".join(rnd.choices(words, k=2000)) + "\n")
    return path


def workloads(work: Path) -> dict[str, tuple[list[str], bool]]:
    """name -> (the command, whether it is a Python program)."""
    data = str(_data(work / "text", 4))
    python = sys.executable  # the venv's: it has numpy
    return {
        "xz": (["sh", "-c", f"xz -9 -T1 -c {data} > /dev/null"], False),
        "gzip": (
            ["sh", "-c", f"for i in $(seq 12); do gzip -9 -c {data}; done > /dev/null"],
            False,
        ),
        "sqlite3": (["sqlite3", ":memory:", SQL], False),
        "numpy": (["env", "OPENBLAS_NUM_THREADS=1", python, "-c", NUMPY], True),
        "python": ([python, "-c", PY_SPIN], True),
    }


def _timed(cmd: list[str], times: Path) -> list[str]:
    """CMD under bash, its process tree's CPU written to TIMES when it ends."""
    return ["bash", "-c", f'"$@"; times > {times}', "bash", *cmd]


def _target_cpu(times: Path) -> float:
    """The children line of bash's `times`: user and system, summed."""
    lines = times.read_text().split("\n")
    total = 0.0
    for m in re.finditer(r"(\d+)m([\d.]+)s", lines[1]):
        total += int(m[1]) * 60 + float(m[2])
    return total


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _key(frame: str) -> str:
    """A leaf's name as both tools give it: a frame with no symbol is its file."""
    if "+0x" in frame:
        return f"[{frame.split('+0x')[0]}]"
    return frame


def self_shares(stacks: dict[tuple[str, ...], int]) -> dict[str, float]:
    own: Counter[str] = Counter()
    for frames, n in stacks.items():
        if frames:
            own[_key(frames[-1])] += n
    total = sum(own.values()) or 1
    return {k: v / total for k, v in own.items()}


def total_shares(stacks: dict[tuple[str, ...], int]) -> dict[str, float]:
    """Each function's share of the samples it is anywhere in (py-spy hides the
    interpreter's own frames: its leaves are Python's, ours native ones under them)."""
    seen: Counter[str] = Counter()
    for frames, n in stacks.items():
        for name in {_key(f) for f in frames}:
            seen[name] += n
    total = sum(stacks.values()) or 1
    return {k: v / total for k, v in seen.items()}


def pyspy(cmd: list[str], hz: int, work: Path) -> dict[tuple[str, ...], int]:
    """py-spy attached to the Python that CMD (bash around it) starts: py-spy starts
    only a Python program itself."""
    out = work / "pyspy.txt"
    shell = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    children = Path(f"/proc/{shell.pid}/task/{shell.pid}/children")
    deadline = time.monotonic() + 5
    while not (kids := children.read_text().split()) and time.monotonic() < deadline:
        time.sleep(0.005)
    subprocess.run(
        ["py-spy", "record", "-r", str(hz), "--native", "-f", "raw", "-o", str(out),
         "--pid", kids[0]],
        capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    shell.wait(timeout=600)
    stacks: dict[tuple[str, ...], int] = {}
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        # An address py-spy could not name (a native root, 0x7f..: ASLR's, another
        # in every run) is left out: no tool's name to compare.
        names = (f.split(" (")[0] for f in stack.split(";"))
        frames = tuple(n for n in names if not n.startswith("0x"))
        stacks[frames] = stacks.get(frames, 0) + int(count)
    return stacks


Run = Callable[[list[str], Path], dict[tuple[str, ...], int] | None]


def _measure(run: Run, cmd: list[str], work: Path) -> dict[str, float | dict[str, float]]:
    times = work / "times"
    times.unlink(missing_ok=True)
    before, t0 = _children_cpu(), time.monotonic()
    stacks = run(_timed(cmd, times), work)
    wall, cpu = time.monotonic() - t0, _children_cpu() - before
    target = _target_cpu(times)
    out: dict[str, float | dict[str, float]] = {"wall": wall, "target_cpu": target}
    out["tool_core_pct"] = 100 * max(cpu - target, 0.0) / wall
    if stacks is not None:
        out["shares"] = self_shares(stacks)
        out["totals"] = total_shares(stacks)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hz", type=int, default=99)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    hz = args.hz
    tools: dict[str, Run] = {
        "none": lambda c, w: (
            subprocess.run(c, capture_output=True, timeout=600, check=True),
            None,
        )[1],
        "ours": lambda c, w: ours(c, hz, w)[0],
        "perf": lambda c, w: perf(c, hz, w)[0],
    }
    has_pyspy = shutil.which("py-spy") is not None
    report: dict[str, dict[str, list[dict[str, float | dict[str, float]]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        for name, (cmd, is_python) in workloads(work).items():
            if args.only and name not in args.only:
                continue
            runs: dict[str, list[dict[str, float | dict[str, float]]]] = {}
            names = [*tools, *(["py-spy"] if is_python and has_pyspy else [])]
            for _ in range(args.repeats):
                for tool in names:
                    run = tools.get(tool) or (lambda c, w: pyspy(c, hz, w))
                    runs.setdefault(tool, []).append(_measure(run, cmd, work))
            report[name] = runs
    table = summarize(report)
    print(json.dumps(table, indent=1) if args.json else render(table))
    return 0


def summarize(
    report: dict[str, dict[str, list[dict[str, float | dict[str, float]]]]],
) -> dict[str, Any]:
    out: dict[str, dict[str, dict[str, float | list[str]]]] = {}
    for name, runs in report.items():
        bare = [float(r["target_cpu"]) for r in runs["none"]]  # type: ignore[arg-type]
        row: dict[str, dict[str, float | list[str]]] = {}
        perf_shares = _pooled(runs["perf"])
        for tool, rs in runs.items():
            cpu = [float(r["target_cpu"]) for r in rs]  # type: ignore[arg-type]
            # Paired: each round's run over that round's bare run.
            ratios = [c / b for c, b in zip(cpu, bare, strict=True) if b > 0]
            entry: dict[str, float | list[str]] = {
                "target_cpu_s": statistics.median(cpu),
                "target_cpu_ratio": statistics.median(ratios),
                "tool_core_pct": statistics.median(float(r["tool_core_pct"]) for r in rs),  # type: ignore[arg-type]
            }
            if tool != "none":
                shares = _pooled(rs)
                entry["top5"] = [f"{k} {100 * v:.1f}" for k, v in _top(shares)]
                entry["max_diff_vs_perf"] = _diff(shares, perf_shares)
                if tool == "ours" and "py-spy" in runs:
                    # Python's frames stand where the evaluation loop ran: py-spy names
                    # them as ours does, perf sees the loop.
                    spy = _pooled(runs["py-spy"], "totals")
                    mine = _pooled(rs, "totals")
                    # Over py-spy's top 5 by total: the Python functions both name.
                    entry["max_diff_vs_pyspy"] = max(
                        abs(mine.get(k, 0) - v) * 100 for k, v in _top(spy)
                    )
            row[tool] = entry
        out[name] = row
    return out


def _top(shares: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(shares.items(), key=lambda kv: -kv[1])[:5]


def _diff(a: dict[str, float], b: dict[str, float]) -> float:
    """The largest difference in points over either's top 5."""
    keys = {k for k, _ in _top(a)} | {k for k, _ in _top(b)}
    return max(abs(a.get(k, 0) - b.get(k, 0)) * 100 for k in keys)


def _pooled(
    rs: list[dict[str, float | dict[str, float]]], what: str = "shares"
) -> dict[str, float]:
    """Shares over the repeats, each run weighing the same."""
    pooled: dict[str, float] = {}
    for r in rs:
        for k, v in r[what].items():  # type: ignore[union-attr]
            pooled[k] = pooled.get(k, 0.0) + v / len(rs)
    return pooled


def render(table: dict[str, Any]) -> str:
    lines = ["| workload | tool | target CPU s | x bare | tool, % of a core | top-5 diff vs perf (py-spy), pts |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for name, row in table.items():
        for tool, e in row.items():
            diff = f"{e['max_diff_vs_perf']:.1f}" if tool not in ("none", "perf") else ""
            if "max_diff_vs_pyspy" in e:
                diff += f" ({e['max_diff_vs_pyspy']:.1f})"
            lines.append(
                f"| {name} | {tool} | {e['target_cpu_s']:.2f} | {e['target_cpu_ratio']:.3f} "
                f"| {e['tool_core_pct']:.1f} | {diff} |"
            )
        for tool in ("ours", "perf", "py-spy"):
            if tool in row:
                lines.append(f"|  | {tool} top-5 | {', '.join(row[tool]['top5'])} | | | |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
