"""What `--profile` with Python frames costs a pure-Python program, against py-spy
sampling the same program at the same rate in the same run: the program's own
throughput (rounds of a fixed split of work) bare, under each; and the tool's own CPU
spent unwinding and naming.

    sudo .venv/bin/python -m bench.bench_python_profile [--seconds 5] [--hz 99] [--python EXE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.cli import CLI
from tests.support.paths import TARGETS

PROGRAM = TARGETS / "py_split.py"


def _rounds(out: str, seconds: float) -> float:
    line = [x for x in out.splitlines() if x.startswith("{")][-1]
    return float(json.loads(line)["rounds"]) / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--hz", type=int, default=99)
    ap.add_argument("--python", default="/usr/bin/python3")
    args = ap.parse_args()
    run = [args.python, str(PROGRAM), str(args.seconds)]
    out: dict[str, object] = {"python": args.python, "hz": args.hz}

    def timed(cmd: list[str]) -> str:
        return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600).stdout

    bare = _rounds(timed(run), args.seconds)
    with tempfile.TemporaryDirectory() as d:
        rec = Path(d) / "rec.jsonl"
        said = timed([*CLI, "record", "--profile-hz", str(args.hz), "--out", str(rec), "--", *run])
        truth = json.loads([x for x in said.splitlines() if x.startswith("{")][-1])
        spun = truth["big"] + truth["small"] + truth["packer"]
        profile = json.loads(rec.read_text().splitlines()[-1])["profile"]
        rows = {f["name"]: f for f in profile["functions"]}
        out.update(
            truth_big_pct=round(100 * truth["big"] / spun, 1),
            ours_big_pct=round(100 * rows["Model.big"]["total"] / rows["main"]["total"], 1),
            ours_throughput=round(_rounds(said, args.seconds) / bare, 3),
            ours_unwind_cpu_pct=round(100 * profile["cpu_s"] / args.seconds, 1),
            ours_samples=profile["samples"],
        )
        spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        if Path(spy).exists():
            raw = Path(d) / "spy.txt"
            spied = timed(
                [spy, "record", "-r", str(args.hz), "-f", "raw", "-o", str(raw), "--", *run]
            )
            big = main = 0
            for line in raw.read_text().splitlines():
                stack, _, count = line.rpartition(" ")
                if "main (" in stack:
                    main += int(count)
                    big += int(count) * ("big (" in stack)
            out["py_spy_big_pct"] = round(100 * big / max(main, 1), 1)
            out["py_spy_throughput"] = round(_rounds(spied, args.seconds) / bare, 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
