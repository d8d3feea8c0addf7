"""What reading and writing a snapshot's JSON costs, against the JSON parser alone.

    .venv/bin/python -m bench.bench_snapshot_codec [--rows N] [--repeat N] [--json]

A snapshot of N probe rows (the rows of tests/support/data/recording.jsonl, cloned) is read
(`json.loads` then `Snapshot.from_json`) and written (`to_json` then `json.dumps`) in a
loop. The peer is `json.loads`/`json.dumps` of the same line alone: the ratio says what
the checked, typed codec adds to the parse a replay or an agent client pays anyway.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from adaptyst_top.snapshot import Snapshot
from bench import common
from tests.support.paths import DATA

REAL = DATA / "recording.jsonl"


def line_of(rows: int) -> str:
    base = json.loads(REAL.read_text().splitlines()[3])
    templates = base["probes"]
    probes = []
    for r in range(rows):
        p = dict(templates[r % len(templates)])
        p["spec"] = f"{p['spec']}#{r}"
        p["id"], p["group"] = r, r
        p["count"] = (p.get("count") or 0) + r
        probes.append(p)
    base["probes"], base["schema_version"] = probes, 1
    return json.dumps(Snapshot.from_json(base).to_json())


def best_us(fn: Any, repeat: int) -> float:
    """The best of 5 rounds of REPEAT calls, in µs per call (the least disturbed)."""
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        rounds.append((time.perf_counter() - start) / repeat * 1e6)
    return min(rounds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    common.header(a.json)
    line = line_of(a.rows)
    value = json.loads(line)
    snap = Snapshot.from_json(value)
    parse = best_us(lambda: json.loads(line), a.repeat)
    read = best_us(lambda: Snapshot.from_json(json.loads(line)), a.repeat)
    dump = best_us(lambda: json.dumps(value), a.repeat)
    write = best_us(lambda: json.dumps(snap.to_json()), a.repeat)
    res = {
        "rows": a.rows,
        "json_loads_us": round(parse, 1),
        "read_us": round(read, 1),
        "read_ratio": round(read / parse, 2),
        "read_us_per_row": round((read - parse) / a.rows, 2),
        "json_dumps_us": round(dump, 1),
        "write_us": round(write, 1),
        "write_ratio": round(write / dump, 2),
    }
    common.footer(res, a.json, width=18, spec="")


if __name__ == "__main__":
    main()
