"""What each rank's share of a row costs a job's view at scale: its bytes on a link, and
the login node's time to read it (`orjson.loads` then `Snapshot.from_json`) and merge it
(`merge_nodes` over the relays' answers), against `orjson.loads` of the same bytes alone.

    .venv/bin/python -m bench.bench_job_shares [--relays 32] [--ranks 512] [--rows 10] [--json]

Each relay's answer holds ROWS probe rows, each with a share for each of its RANKS ranks
(16 ranks a node on 32 nodes at the defaults): what a 1,000-node job of 16,000 ranks sends
the login node through 32 relays every interval. Pure Python: no nodes are made.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import orjson

from adaptyst_top.runtime.job_merge import merge_nodes
from adaptyst_top.snapshot import (
    Latency,
    NodeState,
    ProbeEntry,
    ProbeTarget,
    ProcessPart,
    Snapshot,
)
from bench import common

RANKS_A_NODE = 16


def relay_answer(relay: int, ranks: int, rows: int) -> bytes:
    """A relay's snapshot, as its link carries it."""
    first = relay * ranks
    probes = []
    for r in range(rows):
        parts = tuple(
            ProcessPart(
                pid=1000 + i % RANKS_A_NODE,
                count=4000 + i,
                total_ns=1.5e9 + 1e6 * i,
                node=f"n{(first + i) // RANKS_A_NODE:05d}",
                rank=first + i,
            )
            for i in range(ranks)
        )
        count = sum(p.count for p in parts)
        lat = Latency(mean_ns=sum(p.total_ns or 0 for p in parts) / count, min_ns=1.0, max_ns=9e9)
        probes.append(
            ProbeEntry(
                group=r,
                id=r,
                spec=f"uprobe:/x/app:f{r}",
                name=f"f{r}",
                kind="uprobe",
                state="attached",
                count=count,
                rate_hz=float(count),
                latency=lat,
                raw=lat,
                hist=((10, count // 2), (11, count - count // 2)),
                parts=parts,
            )
        )
    nodes = sorted({p.node or "" for p in probes[0].parts})
    snap = Snapshot(
        t=1.0,
        host=nodes[0],
        probes=tuple(probes),
        target=ProbeTarget("job 7", tuple(range(1000, 1000 + RANKS_A_NODE))),
        nodes=tuple(NodeState(n, "ok", None, 0.2) for n in nodes),
    )
    return orjson.dumps(snap.to_json())


def best_s(fn: Callable[[], object]) -> float:
    """The best of 3 calls, in seconds (the least disturbed)."""
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--relays", type=int, default=32)
    ap.add_argument("--ranks", type=int, default=512, help="ranks a relay reaches")
    ap.add_argument("--rows", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    common.header(a.json)
    answers = {f"relay{i}": relay_answer(i, a.ranks, a.rows) for i in range(a.relays)}
    shares = a.relays * a.ranks * a.rows
    size = sum(map(len, answers.values()))
    parse = best_s(lambda: [orjson.loads(b) for b in answers.values()])
    read = best_s(lambda: [Snapshot.from_json(orjson.loads(b)) for b in answers.values()])
    snaps = {k: Snapshot.from_json(orjson.loads(b)) for k, b in answers.items()}
    states = [n for s in snaps.values() for n in s.nodes]
    merge = best_s(lambda: merge_nodes(2.0, "login", "7", snaps, states, {}, None, set(snaps)))
    res = {
        "relays": a.relays,
        "ranks": a.relays * a.ranks,
        "rows": a.rows,
        "shares": shares,
        "bytes_per_share": round(size / shares, 1),
        "orjson_loads_us_per_share": round(parse / shares * 1e6, 2),
        "read_us_per_share": round(read / shares * 1e6, 2),
        "read_ratio": round(read / parse, 2),
        "merge_us_per_share": round(merge / shares * 1e6, 2),
        # The login node's whole interval, read and merged, for this job.
        "login_s_per_interval": round(read + merge, 3),
        "shares_per_core_second": round(shares / (read + merge)),
    }
    common.footer(res, a.json, width=26, spec="")


if __name__ == "__main__":
    main()
