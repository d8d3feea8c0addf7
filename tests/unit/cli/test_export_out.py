"""`export --out` never destroys a recording: the output being the input (the same
path, a link, a hard link) is refused with one line, and the output takes its name only
once the export is whole."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from adaptyst_top.runtime.record_file import replaced_output
from tests.support.paths import DATA

RECORDING = DATA / "recording.jsonl"


def export(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adaptyst_top.cli.start", "export", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("how", ["itself", "symlink", "hard link"])
def test_export_onto_its_own_recording_is_refused(tmp_path: Path, how: str) -> None:
    rec = tmp_path / "run.jsonl"
    shutil.copy(RECORDING, rec)
    before = rec.read_bytes()
    out = rec
    if how == "symlink":
        out = tmp_path / "link.jsonl"
        out.symlink_to(rec)
    elif how == "hard link":
        out = tmp_path / "hard.jsonl"
        os.link(rec, out)
    done = export(str(rec), "--out", str(out))
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "the recording itself" in done.stderr
    assert rec.read_bytes() == before


def test_export_replaces_its_output_whole(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("what was there\n")
    done = export(str(RECORDING), "--out", str(out))
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == len(RECORDING.read_text().splitlines())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]  # no temporary left


def test_an_export_cut_short_leaves_what_was_there(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl.zst"
    out.write_bytes(b"what was there")
    with pytest.raises(KeyboardInterrupt), replaced_output(str(out)) as f:
        f.write("half a line")
        raise KeyboardInterrupt
    assert out.read_bytes() == b"what was there"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl.zst"]
