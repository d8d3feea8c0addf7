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

RECORDING = Path(__file__).parent / "data" / "recording.jsonl"
RSS_BOUND = 200 << 20  # the bound for `export` of any .zst
CLI = [sys.executable, "-m", "adaptyst_top.cli.start"]


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
    assert status == 0, err
    lines = err.strip().splitlines()
    assert lines == [f"adaptyst-top: skipped 1 malformed line(s) of {bomb}"], err


def test_a_line_priced_past_the_budget_is_skipped_not_parsed(tmp_path: Path) -> None:
    lines = RECORDING.read_bytes().splitlines(keepends=True)[:3]
    crafted = b"[" + b"[]," * (LINE_MAX // 4) + b"[]]\n"  # about 500 MB as lists
    path = tmp_path / "crafted.zst"
    with open(path, "wb") as f:
        cctx = zstandard.ZstdCompressor(level=3, write_checksum=True)
        for line in (lines[0], crafted, *lines[1:]):
            f.write(cctx.compress(line))
    status, err, rss = run_measured([*CLI, "export", str(path), "--out", "-"])
    assert rss < RSS_BOUND, f"export peaked at {rss >> 20} MiB"
    assert status == 0, err
    assert "skipped 1 malformed line(s)" in err


def test_valid_lines_that_decode_huge_stream_in_bounded_memory(tmp_path: Path) -> None:
    line = RECORDING.read_bytes().splitlines(keepends=True)[-1]
    copies = (64 << 20) // len(line)  # 64 MiB of valid snapshots from a few KB
    path = tmp_path / "many.zst"
    path.write_bytes(repeated_frames(line * 1024, copies // 1024))
    status, err, rss = run_measured([*CLI, "export", str(path), "--out", "-"])
    assert status == 0, err
    assert rss < RSS_BOUND, f"export peaked at {rss >> 20} MiB"


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
