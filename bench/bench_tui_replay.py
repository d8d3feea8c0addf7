"""The TUI's bounded memory over a long replay at high speed, and how fast a key
takes effect with 200 probe rows (goal: within 100 ms).

    .venv/bin/python -m bench.bench_tui_replay [--snapshots N] [--json]

The recording is synthetic in its numbers but has the shape of a real one (the
probe rows of tests/support/data/recording.jsonl, cloned to 200 rows).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import resource
import tempfile
import time
from pathlib import Path

from adaptyst_top.runtime.sources import ReplaySource
from adaptyst_top.tui.app import MonitorApp
from bench import common
from tests.support.paths import DATA

REAL = DATA / "recording.jsonl"


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def synthetic(path: Path, snapshots: int, rows: int) -> None:
    base = json.loads(REAL.read_text().splitlines()[3])
    templates = base["probes"]
    with open(path, "w") as f:
        for i in range(snapshots):
            snap = copy.copy(base)
            snap["t"] = i * 0.5
            probes = []
            for r in range(rows):
                p = dict(templates[r % len(templates)])
                p["spec"] = f"{p['spec']}#{r}"
                p["id"] = r
                p["count"] = (p.get("count") or 0) + i * (r + 1)
                p["rate_hz"] = float((i * 7 + r) % 1000)
                probes.append(p)
            snap["probes"] = probes
            f.write(json.dumps(snap) + "\n")


async def run(path: Path, snapshots: int) -> dict[str, float]:
    app = MonitorApp(ReplaySource(path), interval=0.5, autoplay=False)
    res: dict[str, float] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        app.step()
        await pilot.pause()
        # Key latency with every row present.
        for key in ("s", "S", "down", "p"):
            t0 = time.perf_counter()
            await pilot.press(key)
            res[f"key_{key}_ms"] = (time.perf_counter() - t0) * 1e3
        await pilot.press("p")
        samples = []
        t0 = time.perf_counter()
        for i in range(1, snapshots):
            app.step()
            if i % 200 == 0:
                await pilot.pause()
            if i % max(1, snapshots // 10) == 0:
                samples.append(rss_mib())
        res["replay_snapshots_per_s"] = snapshots / (time.perf_counter() - t0)
    res["rss_first_tenth_mib"] = samples[0]
    res["rss_last_mib"] = samples[-1]
    res["rss_growth_mib"] = samples[-1] - samples[0]
    res["max_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--snapshots", type=int, default=5000)
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    common.header(args.json)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "long.jsonl"
        synthetic(path, args.snapshots, args.rows)
        res = asyncio.run(run(path, args.snapshots))
    res["rows"] = args.rows
    common.footer(res, args.json, width=26, spec="10.2f")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
