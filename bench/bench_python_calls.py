"""What a `python:` probe costs the program, per call of the probed function and per call
of the others, against peers in the same run: the bare program; a no-op `sys.setprofile`
hook (the cheapest Python-level tracer); py-spy sampling it at 100 Hz (which counts no
calls). A ~20 us function and a tiny one called 10 times after each.

    sudo .venv/bin/python -m bench.bench_python_calls [--seconds 3] [--rounds 5] [--python EXE...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.cli import CLI

PROGRAM = r"""
import json, sys, time
def spin(n):
    x = 0
    for i in range(n):
        x += i * i
    return x
def work():
    return spin(%(n)d)
def tiny(i):
    return i + 1
def main(seconds):
    end = time.monotonic() + seconds
    calls = took = tinies = tiny_ns = 0
    while time.monotonic() < end:
        t0 = time.perf_counter_ns(); work(); t1 = time.perf_counter_ns()
        for i in range(10):
            tiny(i)
        t2 = time.perf_counter_ns()
        took += t1 - t0; tiny_ns += t2 - t1; calls += 1; tinies += 10
    print(json.dumps({"calls": calls, "work_ns": took / calls, "tiny_ns": tiny_ns / tinies}))
%(pre)s
main(float(sys.argv[1]))
"""
SPIN = 700  # ~20 us a call of work() on this kind of machine
NOOP_PROFILE = "sys.setprofile(lambda *a: None)"


def _run(cmd: list[str]) -> dict[str, float]:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300).stdout
    line = [x for x in out.splitlines() if x.startswith("{")][-1]  # py-spy says more
    return dict(json.loads(line))


def measure(python: str, seconds: float, d: Path, rounds: int) -> dict[str, object]:
    """Each variant once a round, beside the bare program in the same round (this VM's
    speed drifts by 10-15% between minutes): each figure is the median over rounds of
    the variant's difference from (or ratio to) that round's bare run."""
    plain, traced = d / "plain.py", d / "traced.py"
    plain.write_text(PROGRAM % {"n": SPIN, "pre": ""})
    traced.write_text(PROGRAM % {"n": SPIN, "pre": NOOP_PROFILE})
    args = [python, str(plain), str(seconds)]
    commands = {
        "bare": args,
        "python_probe": [
            *CLI,
            "record",
            "--probe",
            f"python:{plain}:work",
            "--out",
            os.devnull,
            "--",
            *args,
        ],
        "setprofile_noop": [python, str(traced), str(seconds)],
    }
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if Path(spy).exists():
        commands["py_spy_100hz"] = [spy, "record", "-r", "100", "-o", os.devnull, "--", *args]
    runs: list[dict[str, dict[str, float]]] = []
    for i in range(rounds):
        order = list(commands) if i % 2 == 0 else list(reversed(commands))
        runs.append({name: _run(commands[name]) for name in order})

    def median_of(name: str, what: str, ratio: bool = False) -> float:
        values = [
            r[name][what] / r["bare"][what] if ratio else r[name][what] - r["bare"][what]
            for r in runs
        ]
        return statistics.median(values)

    others = [name for name in commands if name != "bare"]
    return {
        "python": python,
        "version": subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
        ).stdout.strip(),
        "rounds": rounds,
        "work_us_bare": round(statistics.median(r["bare"]["work_ns"] for r in runs) / 1e3, 2),
        **{f"{name}_per_call_ns": round(median_of(name, "work_ns")) for name in others},
        **{f"{name}_per_other_call_ns": round(median_of(name, "tiny_ns")) for name in others},
        "python_probe_wall_ratio": round(median_of("python_probe", "work_ns", ratio=True), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument(
        "--python",
        nargs="*",
        default=[
            p
            for p in ("/usr/bin/python3", "/root/.pyenv/versions/3.12.1/bin/python3.12")
            if os.path.exists(p)
        ],
    )
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        results = [measure(p, args.seconds, Path(d), args.rounds) for p in args.python]
    for r in results:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
