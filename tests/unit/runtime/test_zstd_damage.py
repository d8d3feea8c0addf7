"""A damaged compressed recording costs the frame the damage is in, and says so: the
rest is replayed and exported, and export exits non-zero. A recording cut short (a
killed `record`) still reads to its last line, quietly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import zstandard

from adaptyst_top.runtime.record_file import open_output, open_recording
from adaptyst_top.runtime.sources import ReplaySource
from adaptyst_top.runtime.zstd_frames import FRAME_LINES, ZSTD_MAGIC, damage_of
from tests.support.paths import DATA

RECORDING = DATA / "recording.jsonl"
LINES = 5 * FRAME_LINES + 10  # the last frame part full


def recorded(path: Path) -> list[dict[str, object]]:
    base = [json.loads(x) for x in RECORDING.read_text().splitlines()]
    lines = []
    for t in range(LINES):
        line = dict(base[t % len(base)])
        line["t"] = float(t)
        lines.append(line)
    with open_output(str(path)) as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    return lines


def frame_starts(data: bytes) -> list[int]:
    out, at = [], data.find(ZSTD_MAGIC)
    while at >= 0:
        out.append(at)
        at = data.find(ZSTD_MAGIC, at + 1)
    return out


def test_a_recording_is_cut_into_frames(tmp_path: Path) -> None:
    path = tmp_path / "run.zst"
    recorded(path)
    assert len(frame_starts(path.read_bytes())) == LINES // FRAME_LINES + 1


def test_damage_costs_its_frame_and_is_said(tmp_path: Path) -> None:
    path = tmp_path / "run.zst"
    lines = recorded(path)
    data = bytearray(path.read_bytes())
    starts = frame_starts(bytes(data))
    hit = (starts[2] + starts[3]) // 2  # the middle of the third frame
    data[hit : hit + 8] = bytes(b ^ 0x5A for b in data[hit : hit + 8])
    path.write_bytes(bytes(data))

    with open_recording(path) as f:
        times = [json.loads(x)["t"] for x in f]
        damage = damage_of(f)
    lost = set(range(2 * FRAME_LINES, 3 * FRAME_LINES))
    assert times == [float(t) for t in range(LINES) if t not in lost]
    assert len(damage) == 1 and damage[0][0] == starts[2]

    src = ReplaySource(path)
    warned = []
    while (snap := src.snapshot()) is not None:
        warned += [w for w in snap.warnings if "damaged" in w]
    src.close()
    assert len(warned) == 1 and "run.zst" in warned[0]

    out = tmp_path / "out.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "adaptyst_top.cli.start", "export", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "damaged" in done.stderr, done.stderr
    assert len(out.read_text().splitlines()) == len(lines) - FRAME_LINES


def test_a_recording_cut_short_reads_to_its_last_line(tmp_path: Path) -> None:
    path = tmp_path / "run.zst"
    recorded(path)
    data = path.read_bytes()
    cut = frame_starts(data)[-1] + (len(data) - frame_starts(data)[-1]) // 2
    path.write_bytes(data[:cut])  # inside the last frame, as a SIGKILL leaves it
    with open_recording(path) as f:
        times = [json.loads(x)["t"] for x in f]
        assert damage_of(f) == []
    assert times == [float(t) for t in range(len(times))]
    assert 5 * FRAME_LINES <= len(times) < LINES


def test_an_old_recording_of_one_frame_says_what_it_lost(tmp_path: Path) -> None:
    path = tmp_path / "old.zst"
    text = "".join(json.dumps({"t": float(t), "pad": "x" * 50}) + "\n" for t in range(2000))
    data = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(text.encode()))
    hit = len(data) // 2
    data[hit : hit + 8] = bytes(b ^ 0x5A for b in data[hit : hit + 8])
    path.write_bytes(bytes(data))
    with open_recording(path) as f:
        got = f.read()
        assert len(damage_of(f)) == 1
    assert len(got) < len(text)
