"""record --out FILE.zst: a zstd stream flushed every interval; replay reads it (and a
recording killed mid-run, to its last whole line) as it reads a plain one."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from adaptyst_top.runtime.record_file import ZSTD_MAGIC, open_output, open_recording
from adaptyst_top.runtime.sources import ReplaySource, check_recording
from tests.support.cli import CLI
from tests.support.paths import DATA

RECORDING = DATA / "recording.jsonl"


def replayed(path: Path, torn: int = 0) -> list[float]:
    """The snapshot times a replay shows; at most TORN lines skipped (a killed record can
    leave its last line half written)."""
    source = ReplaySource(path)
    times = []
    while (snap := source.snapshot()) is not None:
        times.append(snap.t)
    assert source.skipped <= torn
    source.close()
    return times


def test_a_compressed_copy_replays_as_the_plain_one_and_is_smaller(tmp_path: Path) -> None:
    out = tmp_path / "copy.jsonl.zst"
    f = open_output(str(out))
    for line in RECORDING.read_text().splitlines():
        f.write(line + "\n")
        f.flush()
    f.close()
    assert out.read_bytes()[:4] == ZSTD_MAGIC
    assert out.stat().st_size * 5 < RECORDING.stat().st_size
    check_recording(str(out))
    assert replayed(out) == replayed(RECORDING)
    with open_recording(out) as z, open(RECORDING, "rb") as plain:
        assert z.read() == plain.read()


def test_a_killed_compressed_recording_replays_to_its_last_line(tmp_path: Path) -> None:
    out = tmp_path / "killed.jsonl.zst"
    proc = subprocess.Popen(
        [*CLI, "record", "--interval", "0.2", "--out", str(out)], stderr=subprocess.PIPE
    )
    # Killed once five lines are flushed, however long the start took on this machine.
    deadline = time.monotonic() + 60
    seen: list[float] = []
    while len(seen) < 5 and time.monotonic() < deadline:
        time.sleep(0.2)
        if out.exists():
            seen = replayed(out, torn=1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # No frame end was written: read to the last flushed block; the line being written
    # when the kill came may be cut (replay skips it and says so).
    times = replayed(out, torn=1)
    assert len(times) >= len(seen) >= 5 and times == sorted(times)


def test_record_to_a_compressed_file_from_the_command_line(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl.zst"
    r = subprocess.run(
        [*CLI, "record", "--duration", "1.2", "--interval", "0.3", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    with open_recording(out) as f:
        lines = [json.loads(x) for x in f.read().splitlines()]
    # As many snapshots as the monitor's own clock allowed (4 on a quiet node; 3 beside
    # four busy loops on 2 cores), the last one final, each replayed as written.
    times = [x["t"] for x in lines]
    assert lines[-1]["final"] and len(lines) >= 2 and times == sorted(times)
    assert out.read_bytes()[:4] == ZSTD_MAGIC and replayed(out) == times
