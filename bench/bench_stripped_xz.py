"""xz's stripped liblzma under the profile, against `perf record --call-graph dwarf` on the
same input in the same run: each function's self share of xz's samples, both named the
same way (by its debug file where one is installed, else by the start of its unwind
table entry, as the profile names it): perf's leaf addresses are placed with the profile's
own tables, so that the two differ only by what they sampled.

    python -m bench.bench_stripped_xz [--mb 20] [--hz 499] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from adaptyst_top.collectors.probes.elf.elf_info import read_elf
from adaptyst_top.collectors.profile.cfi import cfi_for
from tests.support.cli import CLI

_MMAP = re.compile(
    r"PERF_RECORD_MMAP2 \d+/\d+: \[(0x[0-9a-f]+)\((0x[0-9a-f]+)\) @ (0x[0-9a-f]+|0) .*\]: r-xp (\S+)"
)
_SAMPLE = re.compile(r"^\s*([0-9a-f]+) \((\S+)\)")


def _name(path: str, vaddr: int) -> str | None:
    """The profile's name of the function at VADDR of PATH, with no debug file: its
    symbol, else its unwind table entry's start."""
    elf = read_elf(path)
    for f in elf.functions:
        if f.address <= vaddr < f.address + f.size:
            return f.name
    start = cfi_for(path).function_at(vaddr)
    return None if start is None else f"{path.rsplit('/', 1)[-1]}+0x{start:x}"


def perf_shares(data: Path) -> Counter[str]:
    text = subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "ip,dso", "-G", "--show-mmap-events"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    maps: list[tuple[int, int, int, str]] = []
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        if m := _MMAP.search(line):
            start, size, off, path = int(m[1], 16), int(m[2], 16), int(m[3], 16), m[4]
            maps.append((start, start + size, off, path))
        elif m := _SAMPLE.match(line):
            ip = int(m[1], 16)
            for lo, hi, off, path in maps:
                if lo <= ip < hi and path.startswith("/"):
                    elf = read_elf(path)
                    file_off = ip - lo + off
                    vaddr = next(
                        (file_off - o + v for v, n, o in elf.loads if o <= file_off < o + n), None
                    )
                    name = _name(path, vaddr) if vaddr is not None else None
                    counts[name or f"[{path.rsplit('/', 1)[-1]}]"] += 1
                    break
            # else: the kernel's (perf samples it too; the profile samples user code)
    return counts


def ours_shares(rec: Path) -> Counter[str]:
    last = json.loads(rec.read_text().splitlines()[-1])
    return Counter({f["name"]: f["self"] for f in last["profile"]["functions"] if f["self"]})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=20, help="MB of base64 text xz compresses")
    ap.add_argument("--hz", type=int, default=499)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        data = Path(d) / "in.txt"
        with open(data, "wb") as f:
            f.write(
                subprocess.run(
                    ["base64"], input=os.urandom(args.mb * 3 << 18), capture_output=True, check=True
                ).stdout
            )
        xz = ["xz", "-c", "-T1", "-6", str(data)]
        rec = Path(d) / "rec.jsonl"
        with open(os.devnull, "wb") as null:
            subprocess.run(
                [
                    *CLI,
                    "record",
                    "--profile-hz",
                    str(args.hz),
                    "--interval",
                    "1",
                    "--out",
                    str(rec),
                    "--",
                    *xz,
                ],
                stdout=null,
                check=True,
            )
            pdata = Path(d) / "perf.data"
            subprocess.run(
                [
                    "perf",
                    "record",
                    "-q",
                    "-F",
                    str(args.hz),
                    "--call-graph",
                    "dwarf",
                    "-o",
                    str(pdata),
                    "--",
                    *xz,
                ],
                stdout=null,
                stderr=subprocess.DEVNULL,
                check=True,
            )
        ours, perf = ours_shares(rec), perf_shares(pdata)
    n_ours, n_perf = sum(ours.values()), sum(perf.values())
    top = [name for name, _ in perf.most_common(8)]
    rows = [
        {
            "function": name,
            "ours_pct": round(100 * ours[name] / n_ours, 1),
            "perf_pct": round(100 * perf[name] / n_perf, 1),
        }
        for name in top
    ]
    bare = sum(v for k, v in ours.items() if k.startswith("[liblzma"))
    result = {
        "mb": args.mb,
        "hz": args.hz,
        "ours_samples": n_ours,
        "perf_samples": n_perf,
        "ours_bare_library_pct": round(100 * bare / max(n_ours, 1), 1),
        "max_diff_points": round(
            max(abs(100 * (ours[n] / n_ours - perf[n] / n_perf)) for n in top), 1
        ),
        "rows": rows,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"{'function':40s} {'ours %':>7s} {'perf %':>7s}")
    for r in rows:
        print(f"{r['function']:40s} {r['ours_pct']:7.1f} {r['perf_pct']:7.1f}")
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}), file=sys.stderr)


if __name__ == "__main__":
    main()
