"""The compact recording format: what is written reads back to the very snapshots, a
lost line costs the lines up to the next full one, `export` writes full lines again."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from adaptyst_top.runtime.record_file import open_output
from adaptyst_top.runtime.record_format import (
    COMPACT_SCHEMA,
    CompactDecoder,
    CompactEncoder,
    expand,
)
from adaptyst_top.runtime.sources import ReplaySource
from adaptyst_top.snapshot import Snapshot
from tests.support.paths import DATA

RECORDING = DATA / "recording.jsonl"


def moving_lines(n: int, seed: int = 3) -> list[dict[str, Any]]:
    """Lines of the recorded run, made to move: counts, histograms, rows that come and
    go, a field that appears and goes, rows idle for a while."""
    rng = random.Random(seed)
    base = [json.loads(x) for x in RECORDING.read_text().splitlines()]
    last = max(base, key=lambda line: len(line["probes"]))
    out = []
    for t in range(n):
        line = json.loads(json.dumps(last))
        line["t"] = float(t)
        line["schema_version"] = 1  # as `record` writes them now
        rows = line["probes"]
        for i, row in enumerate(rows):
            if rng.random() < 0.3:
                continue  # idle: as the line before... only if it was idle then too
            row["count"] = row.get("count", 0) + t * (i + 1)
            row["rate_hz"] = float(rng.randint(0, 100))
            if isinstance(row.get("hist"), list):
                row["hist"] = [[b, c + t * rng.randint(0, 2)] for b, c in row["hist"]]
                if t % 3 == 0:
                    row["hist"].append([999, t])
        if t % 4 == 1:
            rows[0]["error"] = "went wrong once"
        if t % 5 == 2:
            rows.insert(1, dict(rows[1], id=1000 + t, name=f"new_{t}"))
        if t % 7 == 3 and len(rows) > 2:
            rows.pop()
        out.append(line)
    return out


def snapshots(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [Snapshot.from_json(x).to_json() for x in lines]


def test_compact_lines_read_back_to_the_same_snapshots() -> None:
    lines = moving_lines(40)
    enc = CompactEncoder(keyframe_every=15)
    written = [json.loads(json.dumps(enc.encode(x))) for x in lines]
    assert sum(1 for w in written if w.get("schema_version") == COMPACT_SCHEMA) == 40 - 3
    back = list(expand(written))
    assert back == lines
    assert snapshots(back) == snapshots(lines)
    full = len(json.dumps(lines))
    compact = len(json.dumps(written, separators=(",", ":")))
    assert compact < full / 2, (compact, full)


def profiled_lines(n: int, seed: int = 5) -> list[dict[str, Any]]:
    """Lines with a profile whose few long stacks recur in most intervals, as a real
    program's do, and a new one now and then."""
    rng = random.Random(seed)
    frames = [f"ns::Solver<double, {i}>::step(std::vector<double> const&)" for i in range(40)]
    known = [(100, 100 + i % 3, tuple(rng.sample(frames, 12))) for i in range(30)]
    out = []
    for t in range(n):
        if t % 4 == 0:
            known.append((100, 101, tuple(rng.sample(frames, 12))))
        picked = rng.sample(known, min(len(known), 20))
        stacks = [
            {"pid": p, "tid": tid, "frames": list(f), "samples": rng.randint(0, 9),
             "off_ns": float(rng.randint(0, 10**6)), "runnable_ns": 0.0}
            for p, tid, f in picked
        ]  # fmt: skip
        out.append(
            {"t": float(t), "probes": [], "devices": [], "schema_version": 1,
             "profile": {"hz": 99, "samples": 10 * t, "stacks": stacks}}
        )  # fmt: skip
    return out


def test_a_profiles_stacks_are_written_once_and_referred_to_after() -> None:
    lines = profiled_lines(60)
    enc = CompactEncoder(keyframe_every=25)
    written = [json.loads(json.dumps(enc.encode(x))) for x in lines]
    assert list(expand(written)) == lines
    assert snapshots(list(expand(written))) == snapshots(lines)
    compact = written[1]["profile"]
    assert "stacks" not in compact and len(compact["stack_refs"]) == 20
    # Past the first lines of a run, a line names the stacks new to it only.
    assert all(len(w["profile"]["stacks_new"]) <= 1 for w in written[5:25])
    full = len(json.dumps(lines))
    assert len(json.dumps(written)) < full / 4, (len(json.dumps(written)), full)


def test_a_stack_reference_to_no_stack_is_a_lost_line() -> None:
    lines = profiled_lines(12)
    enc = CompactEncoder(keyframe_every=6)
    written = [json.loads(json.dumps(enc.encode(x))) for x in lines]
    written[2]["profile"]["stack_refs"][0][0] = 10**9
    written[3]["profile"]["stacks_new"] = [[7, 1, 1, []]]  # out of order
    back = list(expand(written))
    assert [x["t"] for x in back] == [0.0, 1.0, *[float(t) for t in range(6, 12)]]


def test_a_lost_line_costs_the_lines_up_to_the_next_full_one() -> None:
    lines = moving_lines(30)
    enc = CompactEncoder(keyframe_every=10)
    written = [enc.encode(x) for x in lines]
    del written[12]  # torn: lines 13..19 cannot be read; 20 is whole again
    back = list(expand(written))
    assert [x["t"] for x in back] == [float(t) for t in [*range(12), *range(20, 30)]]
    assert snapshots(back[12:]) == snapshots(lines[20:])
    dec = CompactDecoder()
    assert dec.decode(written[0]) == lines[0]  # a full line passes as it is


def test_record_replay_and_export_of_a_compact_zst(tmp_path: Path) -> None:
    lines = moving_lines(25)
    enc = CompactEncoder(keyframe_every=10)
    path = tmp_path / "run.zst"
    f = open_output(str(path))
    for x in lines:
        f.write(json.dumps(enc.encode(x), separators=(",", ":")) + "\n")
    f.close()
    src = ReplaySource(path)
    got = []
    while (snap := src.snapshot()) is not None:
        got.append(snap.to_json())
    src.close()
    assert got == snapshots(lines) and src.skipped == 0
    out = subprocess.run(
        [sys.executable, "-m", "adaptyst_top.cli.start", "export", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert [json.loads(x) for x in out.stdout.splitlines()] == snapshots(lines)
    bad = subprocess.run(
        [sys.executable, "-m", "adaptyst_top.cli.start", "export", str(tmp_path / "none")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "no such file" in bad.stderr
