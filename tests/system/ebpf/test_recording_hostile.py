"""A recording is something users pass to each other: whatever its bytes, `export` and
`replay` read it in bounded memory, refuse what is not a regular file without waiting
on it, and say what they skipped in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import zstandard

from adaptyst_top.runtime.record_file import LINE_MAX, open_recording, recording_lines
from adaptyst_top.runtime.zstd_frames import (
    RATIO_FROM,
    RATIO_MAX,
    ZSTD_MAGIC,
    damage_of,
    stopped_line,
)
from tests.support.cli import CLI
from tests.support.paths import DATA

RECORDING = DATA / "recording.jsonl"
RSS_BOUND = 200 << 20  # the bound for `export` of any .zst

# Peak RSS is kept across exec (the kernel's maxrss), so a child forked straight from
# this test would carry the test's own memory: a small launcher forks it instead.
_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024)
"""


def run_measured(argv: list[str], timeout: float = 120.0) -> tuple[int, str, int]:
    """ARGV's exit status, its stderr and its peak RSS in bytes (the kernel's account)."""
    done = subprocess.run(
        [sys.executable, "-S", "-c", _LAUNCHER, *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    status, rss = done.stdout.split()
    return int(status), done.stderr, int(rss)


def repeated_frames(payload: bytes, times: int) -> bytes:
    """PAYLOAD compressed once, its frame TIMES over: a small file that decodes huge."""
    frame = zstandard.ZstdCompressor(level=19, write_checksum=True).compress(payload)
    return frame * times


def test_a_bomb_without_newlines_is_read_in_bounded_memory(tmp_path: Path) -> None:
    first = RECORDING.read_bytes().splitlines(keepends=True)[0]
    head = zstandard.ZstdCompressor(write_checksum=True).compress(first)
    bomb = tmp_path / "bomb.zst"
    bomb.write_bytes(head + repeated_frames(b"x" * (128 << 20), 8))  # 1 GiB of "x"
    assert bomb.stat().st_size < 256 << 10
    status, err, rss = run_measured([*CLI, "export", str(bomb), "--out", "-"])
    assert rss < RSS_BOUND, f"export peaked at {rss >> 20} MiB"
    assert status == 1, err
    lines = err.strip().splitlines()
    assert lines[0] == f"adaptyst-top: skipped 1 malformed line(s) of {bomb}", err
    assert f"{bomb}: decodes to more than {RATIO_MAX} times its size" in lines[1], err


def test_a_line_priced_past_the_budget_is_skipped_not_parsed(tmp_path: Path) -> None:
    lines = RECORDING.read_bytes().splitlines(keepends=True)[:3]
    crafted = b"[" + b"[]," * (LINE_MAX // 4) + b"[]]\n"  # about 500 MB as lists
    path = tmp_path / "crafted.jsonl"  # plain: a .zst of it stops at its ratio first
    path.write_bytes(b"".join((lines[0], crafted, *lines[1:])))
    status, err, rss = run_measured([*CLI, "export", str(path), "--out", "-"])
    assert rss < RSS_BOUND, f"export peaked at {rss >> 20} MiB"
    assert status == 0, err
    assert "skipped 1 malformed line(s)" in err


def test_valid_lines_that_decode_huge_stop_at_a_recordings_ratio(tmp_path: Path) -> None:
    line = RECORDING.read_bytes().splitlines(keepends=True)[-1]
    copies = (64 << 20) // len(line)  # 64 MiB of valid snapshots from a few KB
    path = tmp_path / "many.zst"
    path.write_bytes(repeated_frames(line * 1024, copies // 1024))
    status, err, rss = run_measured([*CLI, "export", str(path), "--out", "-"])
    assert rss < RSS_BOUND, f"export peaked at {rss >> 20} MiB"
    assert status == 1 and f"decodes to more than {RATIO_MAX} times its size" in err, err


def test_a_newline_bomb_stops_where_no_recording_could_be(tmp_path: Path) -> None:
    """16 MB of newlines from 0.5 KB took 4 s; 36 KB of them, some 270 s."""
    path = tmp_path / "newlines.zst"
    first = RECORDING.read_bytes().splitlines(keepends=True)[0]
    path.write_bytes(
        zstandard.ZstdCompressor().compress(first) + repeated_frames(b"\n" * (64 << 20), 4)
    )
    with open_recording(path) as f:
        lines = sum(1 for _ in recording_lines(f))
        stopped = stopped_line(f, "r")
    # Stopped within a step of the ratio's start (a step yields at most 8 MiB).
    assert stopped is not None and lines <= 2 * RATIO_FROM, lines


def nested_frames(depth: int) -> bytes:
    """DEPTH zstd frames, each a raw block holding the next, each ending in a bad block:
    every magic number inside a failed frame starts a frame that fails near the end."""
    window = b"\x00\x38"  # no checksum, no content size; a 128 KiB window
    bad = b"\x07\x00\x00"  # a last block of the reserved type
    inner = ZSTD_MAGIC + window + bad
    for _ in range(depth):
        size = len(inner)
        raw = (size << 3).to_bytes(3, "little")  # a raw block, not the last
        inner = ZSTD_MAGIC + window + raw + inner + bad
    return inner


def test_frames_nested_in_a_bad_one_are_decoded_in_linear_work(tmp_path: Path) -> None:
    """Each failed frame restarted a byte after its start: 10,000 nested frames (120 KB)
    took 24.5 s of CPU, and more repeats of them hours. Each byte is decoded at most
    twice now, whatever the nesting."""
    path = tmp_path / "nested.zst"
    first = RECORDING.read_bytes().splitlines(keepends=True)[0]
    path.write_bytes(zstandard.ZstdCompressor().compress(first) + nested_frames(4000) * 3)
    with open_recording(path) as f:
        read = [x for x in recording_lines(f) if x is not None]
        work = f.raw._fed  # type: ignore[attr-defined]
        damage = damage_of(f)
    assert read == [first]
    assert work <= 3 * path.stat().st_size, (work, path.stat().st_size)
    assert damage and sum(n for _, n in damage) <= path.stat().st_size


def test_control_characters_are_priced_as_what_they_cost(tmp_path: Path) -> None:
    """A host of 12 million U+0085 (24 MB, 5 KB compressed) took export to 1 GB: each is
    escaped into a piece of its own when read back."""
    path = tmp_path / "controls.jsonl"  # plain: a .zst of it stops at its ratio first
    lines = RECORDING.read_bytes().splitlines(keepends=True)[:2]
    crafted = b'{"t": 0.5, "host": "' + "\u0085".encode() * 12_000_000 + b'"}\n'
    path.write_bytes(b"".join((lines[0], crafted, lines[1])))
    status, err, rss = run_measured([*CLI, "export", str(path), "--out", "-"])
    assert rss < RSS_BOUND, f"export peaked at {rss >> 20} MiB"
    assert status == 0 and "skipped 1 malformed line(s)" in err, err


def test_a_compact_line_uses_each_row_before_it_once(tmp_path: Path) -> None:
    """One row of 80,000 histogram buckets, then lines repeating it with
    {"diff": {}, "from": 0}: 15 KB made 915 MB, then a MemoryError traceback."""
    from adaptyst_top.runtime.record_format import COMPACT_SCHEMA

    first = json.loads(RECORDING.read_bytes().splitlines()[0])
    row = {**first["probes"][0], "hist": [[i % 100, 1] for i in range(80_000)]}
    path = tmp_path / "compact.zst"
    cctx = zstandard.ZstdCompressor(level=3, write_checksum=True)
    with open(path, "wb") as f:
        f.write(cctx.compress((json.dumps({**first, "probes": [row]}) + "\n").encode()))
        repeat = {"diff": {}, "from": 0}
        line = {**first, "schema_version": COMPACT_SCHEMA, "probes": [repeat] * 60}
        for _ in range(30):
            f.write(cctx.compress((json.dumps(line) + "\n").encode()))
    status, err, rss = run_measured([*CLI, "export", str(path), "--out", "-"])
    assert rss < RSS_BOUND, f"export peaked at {rss >> 20} MiB"
    assert status == 0 and "skipped 30 malformed line(s)" in err, err


def test_an_over_long_line_is_one_damaged_line_and_the_rest_is_read(tmp_path: Path) -> None:
    lines = RECORDING.read_bytes().splitlines(keepends=True)[:2]
    path = tmp_path / "long.jsonl"
    with open(path, "wb") as f:
        f.write(lines[0])
        f.write(b"y" * (LINE_MAX + 10) + b"\n")
        f.write(lines[1])
    with open_recording(path) as f:
        read = list(recording_lines(f))
    assert read == [lines[0], None, lines[1]]


def test_a_fifo_is_refused_at_once_by_export_and_replay(tmp_path: Path) -> None:
    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    for argv in ([*CLI, "export", str(fifo)], [*CLI, "replay", str(fifo)]):
        started = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert time.monotonic() - started < 10
        assert done.returncode == 1
        assert done.stderr.strip().splitlines() == [
            f"adaptyst-top: {fifo}: not a regular file, so not a recording"
        ], done.stderr


def test_a_recording_still_reads_whole(tmp_path: Path) -> None:
    path = tmp_path / "run.zst"
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    path.write_bytes(cctx.compress(RECORDING.read_bytes()))
    with open_recording(path) as f:
        got = [json.loads(x) for x in recording_lines(f) if x is not None]
    assert got == [json.loads(x) for x in RECORDING.read_text().splitlines()]


def test_a_skippable_frame_is_damage_not_a_place_to_hide_the_rest(tmp_path: Path) -> None:
    """A skippable frame declaring 4 GB swallowed the frames after it, and nothing was
    said: 3 of 4 lines came out."""
    lines = RECORDING.read_bytes().splitlines(keepends=True)[:4]
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    hiding = b"\x50\x2a\x4d\x18" + (0xFFFF_FFFF).to_bytes(4, "little")
    path = tmp_path / "hiding.zst"
    path.write_bytes(
        cctx.compress(lines[0]) + hiding + b"".join(cctx.compress(x) for x in lines[1:])
    )
    with open_recording(path) as f:
        read = [x for x in recording_lines(f) if x is not None]
        damage = damage_of(f)
    assert read == lines
    assert damage and damage[0][1] == len(hiding)
