"""python:FILE:FUNC for real, on every CPython this node has that the tool knows: each
call of the probed function counted exactly and timed within 5% of the program's own
timing of it; functions it did not name get no row; a process the monitor did not
launch is refused in one line; a probe added while a launched program runs (3.12+, or
beside one from its start before) counts every call from then."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from adaptyst_top.runtime.session import open_session
from adaptyst_top.runtime.session_options import ProbeSettings, SessionOptions, Target
from adaptyst_top.runtime.sources import ActionError, LiveSource
from tests.support.bpf_objects import none_left
from tests.support.cli import CLI
from tests.support.marks import requires_root
from tests.support.paths import TARGETS
from tests.system.ebpf.test_python_frames import INTERPRETERS, version_of

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


def test_a_long_qualified_name_is_shown_whole(tmp_path: Path) -> None:
    """Longer than a probe's key: the hook tells the name whole through the layer's name
    site, and the row, its recording and its count keep it."""
    rec = tmp_path / "rec.jsonl"
    spec = f"python:{PROGRAM}:Transformer*.forward*"
    cmd = [*CLI, "record", "--probe", spec, "--interval", "1", "--out", str(rec), "--"]
    proc = subprocess.run(
        [*cmd, INTERPRETERS[0], str(PROGRAM), "2"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    truth = json.loads(proc.stdout.strip().splitlines()[-1])
    (row,) = json.loads(rec.read_text().splitlines()[-1])["probes"]
    name = "TransformerEncoderLayerWithRotaryEmbeddings.forward_attention_block"
    assert (row["name"], row["count"]) == (name, truth["long_calls"]), row


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


LATER = TARGETS / "py_later.py"
LATER_CALLS = 2000  # ~0.4 s of Model.big: a mean over many hand-overs


def _run_later(python: str, tmp_path: Path, from_start: Sequence[str] = ()) -> dict[str, Any]:
    """LATER under a session whose keys may add probes (the monitor's), Model.big's probe
    added once it runs (as `u` adds it), then told to go: Model.big's row and what the
    program measured."""
    go = tmp_path / "go"
    out = (tmp_path / "out.txt").open("w+")
    session = open_session(
        SessionOptions(
            Target(
                command=[python, str(LATER), str(go), str(LATER_CALLS)],
                python_later=True,
                child_stdout=out,
                child_stderr=out,
            ),
            ProbeSettings(list(from_start)),
        )
    )
    try:
        session.start()
        # Its first call made before the probe exists (a slow start once let the probe
        # count it: 2001 of 2000).
        ready = tmp_path / "go.ready"
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        source = LiveSource(session)
        source.add(f"python:{LATER}:Model.big")
        assert session.engine is not None and session.engine.wait(60)
        time.sleep(0.5)  # the hook's thread takes the new set (it runs within 5 ms)
        go.touch()
        assert session.child is not None and session.child.proc.wait(60) == 0
        rows = {p.name: p for p in session.snapshot().probes}
    finally:
        session.close()
    out.seek(0)
    lines = out.read().splitlines()
    assert lines and "Traceback" not in "\n".join(lines), lines
    return {"truth": json.loads(lines[-1]), "rows": rows}


# Serial: with both cores busy, the program's own timing of a call took in 7% more than
# the hook's (a thread of the program's holding the GIL at its return, descheduled);
# alone, 1.3-3.3%.
@pytest.mark.serial
@pytest.mark.parametrize(
    "python", [p for p in INTERPRETERS if version_of(p) >= (3, 12)] or ["none"]
)
def test_a_probe_added_while_it_runs_counts_every_call_from_then(
    python: str, tmp_path: Path
) -> None:
    assert python != "none", "no CPython 3.12+ on this node"
    got = _run_later(python, tmp_path)
    row, truth = got["rows"]["Model.big"], got["truth"]
    assert row.kind == "python" and row.count == truth["calls"] == LATER_CALLS
    assert row.mean_ns == pytest.approx(truth["mean_ns"], rel=0.05)
    assert none_left()


def test_before_312_a_later_probe_joins_one_from_the_start(tmp_path: Path) -> None:
    older = [p for p in INTERPRETERS if version_of(p) < (3, 12)]
    assert older, "no CPython before 3.12 on this node (Debian's is 3.11)"
    got = _run_later(older[-1], tmp_path, from_start=[f"python:{LATER}:tiny"])
    row, truth = got["rows"]["Model.big"], got["truth"]
    assert row.count == truth["calls"] == LATER_CALLS
    assert got["rows"]["tiny"].count == truth["waited"] * 100
    assert none_left()


def test_before_312_a_later_probe_alone_is_refused_in_one_line(tmp_path: Path) -> None:
    older = [p for p in INTERPRETERS if version_of(p) < (3, 12)]
    assert older, "no CPython before 3.12 on this node (Debian's is 3.11)"
    session = open_session(
        SessionOptions(
            Target(
                command=[older[-1], str(LATER), str(tmp_path / "go"), "1"],
                python_later=True,
                child_stdout=subprocess.DEVNULL,
            )
        )
    )
    try:
        session.start()
        time.sleep(0.5)  # the interpreter maps itself
        with pytest.raises(ActionError, match=r"takes python: probes only from its start") as e:
            LiveSource(session).add(f"python:{LATER}:Model.big")
        assert "\n" not in str(e.value) and session.engine is None
    finally:
        session.close()
    assert none_left()


FORGED = """
import ctypes, os, time
lib = ctypes.CDLL(os.environ["ADAPTYST_PY_LAYER"])
lib.adaptyst_py_timed.argtypes = [
    ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_uint64), ctypes.c_uint64
]
while not lib.adaptyst_py_probed():
    time.sleep(0.01)
ns = [1000, 2**60, 3000, 2**64 - 2, 2**46]
lib.adaptyst_py_timed((ctypes.c_char_p * 5)(*[b"forged"] * 5), (ctypes.c_uint64 * 5)(*ns), 5)
time.sleep(1.5)
"""


def test_times_a_program_hands_over_past_a_day_are_counted_not_timed(tmp_path: Path) -> None:
    """A program's own records (it may write anything there): a time past a day is
    counted, not timed; the row's figures stay those of the others."""
    program = tmp_path / "forged.py"
    program.write_text(FORGED)
    rec = tmp_path / "rec.jsonl"
    proc = subprocess.run(
        [
            *CLI,
            "record",
            "--probe",
            f"python:{tmp_path}/none.py:forged",
            "--interval",
            "0.5",
            "--out",
            str(rec),
            "--",
            "/usr/bin/python3",
            str(program),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    last = json.loads(rec.read_text().splitlines()[-1])
    (row,) = [r for r in last["probes"] if r["name"] == "forged"]
    assert row["count"] == 5 and row["timed"] == 2
    assert row["max_ns"] == 3000 and row["min_ns"] == 1000
    assert row["mean_ns"] == pytest.approx(2000, abs=1)
    assert none_left()
