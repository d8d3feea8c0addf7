"""python:FILE:FUNC for real, on every CPython this node has that the tool knows: each
call of the probed function counted exactly and timed within 5% of the program's own
timing of it; functions it did not name get no row; a process the monitor did not
launch is refused in one line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.bpf_objects import none_left
from tests.support.cli import CLI
from tests.support.marks import requires_root
from tests.support.paths import TARGETS
from tests.system.ebpf.test_python_frames import INTERPRETERS

PROGRAM = TARGETS / "py_calls.py"
pytestmark = [pytest.mark.ebpf, requires_root]


@pytest.mark.parametrize("python", INTERPRETERS)
def test_every_call_counted_and_timed(python: str, tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    spec = f"python:{PROGRAM}:Model.b*"
    proc = subprocess.run(
        [
            *CLI,
            "record",
            "--probe",
            spec,
            "--interval",
            "1",
            "--out",
            str(rec),
            "--",
            python,
            str(PROGRAM),
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    truth = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = json.loads(rec.read_text().splitlines()[-1])["probes"]
    assert [r["name"] for r in rows] == ["Model.big"], rows  # tiny is not named
    row = rows[0]
    assert row["kind"] == "python" and row["state"] in ("attached", "ended"), row
    assert row["count"] == truth["calls"]
    assert row["mean_ns"] == pytest.approx(truth["mean_ns"], rel=0.05)
    assert none_left()


def test_a_process_not_launched_is_refused_in_one_line(tmp_path: Path) -> None:
    target = subprocess.Popen(["/usr/bin/python3", str(PROGRAM), "30"], stdout=subprocess.DEVNULL)
    try:
        proc = subprocess.run(
            [
                *CLI,
                "record",
                "--pid",
                str(target.pid),
                "--probe",
                f"python:{PROGRAM}:*",
                "--duration",
                "1",
                "--out",
                str(tmp_path / "r.jsonl"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        target.kill()
        target.wait()
    text = proc.stderr + (tmp_path / "r.jsonl").read_text()
    assert "a command the monitor launches" in text and "Traceback" not in text
    assert none_left()
