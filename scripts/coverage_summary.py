"""`make test`'s coverage line: the package's share of lines run by the suite (pytest's
processes and the Python processes they started), and the modules under 50%.

    scripts/coverage_summary.py DATA_FILE
"""

from __future__ import annotations

import json
import stat
import sys
import tempfile
from pathlib import Path

import coverage

LOW = 50.0


def main(data_file: str) -> int:
    cov = coverage.Coverage(data_file=data_file)
    # What processes wrote after pytest-cov's own combine: regular files only (the folder
    # is writable by all; a FIFO there would hang the combine).
    folder = Path(data_file).parent
    late = [
        str(p) for p in folder.glob(Path(data_file).name + ".*") if stat.S_ISREG(p.lstat().st_mode)
    ]
    if late:
        cov.combine(data_paths=late, keep=False)
    cov.load()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "coverage.json"
        try:
            cov.json_report(outfile=str(out))
        except coverage.CoverageException as exc:
            print(f"coverage: none measured ({exc})")
            return 0
        report = json.loads(out.read_text())
    files = report["files"]
    totals = report["totals"]
    low = sorted(
        (f["summary"]["percent_covered"], name.split("adaptyst_top/", 1)[-1])
        for name, f in files.items()
        if f["summary"]["percent_covered"] < LOW and f["summary"]["num_statements"]
    )
    print(
        f"coverage: {totals['percent_covered']:.1f}% of {totals['num_statements']} lines in "
        f"{len(files)} modules; {len(low)} under {LOW:.0f}%:"
    )
    for pct, name in low:
        print(f"  {pct:5.1f}%  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
