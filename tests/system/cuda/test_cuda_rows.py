"""`cuda:` rows for real eBPF on CUPTI's fake (no GPU here): a program on it, launched by
`record` under the tool's injection library, makes kernels, copies and memsets with
known device times; the rows must count exactly those, time them as the records say,
and stay bounded whatever the program does."""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from adaptyst_top.collectors.probes.kinds.cuda import INJECTION_ENV
from adaptyst_top.collectors.probes.kinds.device_layer import shown_name
from tests.support.cli import CLI, record_last
from tests.support.cuda_fake import build_app
from tests.support.marks import requires_root

pytestmark = requires_root

MAX_BUFFERS = 32  # cuda_inject.c's MAX_BUFS: 8 MiB of host buffers at most
DEVICE_POOL = 16  # and the device buffers it asks CUPTI to keep at most


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_app(tmp_path_factory.mktemp("cuda"))


def record(app: Path, spec: str, out: Path, *args: str, budget_pct: str = "100") -> dict[str, Any]:
    return run_record(app, spec, out, *args, budget_pct=budget_pct)[0]


def run_record(
    app: Path, spec: str, out: Path, *args: str, budget_pct: str = "100"
) -> tuple[dict[str, Any], str]:
    """The last snapshot, and what the program and the monitor said on stderr."""
    return record_last(
        "--probe", spec, "--budget", budget_pct, "--", str(app), "--out", str(out), *args
    )


def rows(snap: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in snap["probes"]}


def test_rows_count_every_record_and_time_it_as_cupti_did(app: Path, tmp_path: Path) -> None:
    """Kernels (two of them alike in their first 31 bytes), graph launches, copies,
    memsets and kernels CUPTI could not time, handed back as the fake's flusher runs:
    counts exact, device time to the nanosecond's rounding, untimed ones counted only."""
    out = tmp_path / "own.json"
    snap = record(
        app, "cuda:*", out, "--launches", "3000", "--graph", "40", "--invalid", "7", "--pace"
    )
    own = json.loads(out.read_text())
    assert own["loaded"] == 1 and own["pool_limit"] == DEVICE_POOL
    got = rows(snap)
    assert set(got) == {shown_name(n) for n in own["launches"]}
    for name, count in own["launches"].items():
        row = got[shown_name(name)]
        assert (row["kind"], row["count"], row.get("error")) == ("cuda", count, None), name
        total = own["device_ns"][name]
        if total == 0:  # start = end = 0: counted, never timed
            assert (row["timed"], row["mean_ns"]) == (0, None)
            continue
        assert row["timed"] == count
        assert row["timed"] * row["mean_ns"] == pytest.approx(total, rel=1e-3), name
        assert row["min_ns"] <= row["p50_ns"] <= row["max_ns"]
    # Names longer than a probe's key are shown whole (the layer's name site).
    assert any(len(n.encode()) > 31 for n in got)


def test_a_glob_shows_the_kernels_it_names_only(app: Path, tmp_path: Path) -> None:
    out = tmp_path / "own.json"
    snap = record(app, "cuda:_Z6*", out, "--launches", "400")
    own = json.loads(out.read_text())["launches"]
    assert set(rows(snap)) == {"_Z6reducePfS_i"}
    assert rows(snap)["_Z6reducePfS_i"]["count"] == own["_Z6reducePfS_i"]


def test_under_a_small_budget_every_record_is_counted_and_some_are_timed(
    app: Path, tmp_path: Path
) -> None:
    out = tmp_path / "own.json"
    snap = record(app, "cuda:_Z9*", out, "--launches", "400000", budget_pct="0.5")
    own = json.loads(out.read_text())["launches"]
    row = rows(snap)["_Z9vectorAddPKfS0_Pfi"]
    assert row["count"] == own["_Z9vectorAddPKfS0_Pfi"]
    assert 0 < row["timed"] < row["count"]
    assert sum(c for _b, c in row["hist"]) == row["timed"]
    assert 1000 <= row["p50_ns"] <= row["max_ns"] <= 50000  # the program's 1-50 us


def test_a_hostile_program_costs_only_itself(app: Path, tmp_path: Path) -> None:
    """5,000 kernels named anew, and a CUPTI that asks for 100 buffers and keeps them:
    the tool lends 32 (8 MiB) at most, the records that find none are counted as
    [dropped], names stay bounded (the rest are [other]), every figure is finite."""
    out = tmp_path / "own.json"
    snap = record(app, "cuda:*", out, "--launches", "1000", "--names", "5000", "--hoard", "100")
    own = json.loads(out.read_text())
    assert own["lent"] == MAX_BUFFERS and own["held_max"] <= MAX_BUFFERS
    probes = snap["probes"]
    total = sum(own["launches"].values()) + own["flood"] + 100
    assert sum(p["count"] for p in probes) == total
    got = rows(snap)
    assert got["[dropped]"]["count"] == 100 and got["[dropped]"]["timed"] == 0
    assert len(probes) <= 1024 + 1 and "[other]" in got
    for p in probes:
        assert 0 <= (p.get("timed") or 0) <= p["count"]
        for field in ("mean_ns", "p50_ns", "p99_ns", "max_ns"):
            assert p.get(field) is None or math.isfinite(p[field]), (p["name"], field)
    assert all("exited" in w for w in snap["warnings"]), snap["warnings"]


def test_without_a_probe_the_library_reads_and_hands_back_only(app: Path, tmp_path: Path) -> None:
    """Loaded (CUDA_INJECTION64_PATH), no probe on its sites: the program runs as
    without it, its buffers going back to the pool."""
    from adaptyst_top.collectors.probes.kinds.cuda import INJECTION_ENV, inject_path

    out = tmp_path / "own.json"
    env = {INJECTION_ENV: inject_path() or "", "PATH": "/usr/bin:/bin"}
    subprocess.run(
        [str(app), "--out", str(out), "--launches", "20000"], env=env, check=True, timeout=60
    )
    own = json.loads(out.read_text())
    assert own["loaded"] == 1 and own["held_max"] <= MAX_BUFFERS


def test_a_process_not_launched_with_the_library_is_refused_in_one_line(
    app: Path, tmp_path: Path
) -> None:
    """--pid on a program started without the library: CUPTI cannot be put under it,
    and one line says so and what to do instead."""
    prog = subprocess.Popen([str(app), "--out", str(tmp_path / "own.json"), "--hold", "30"])
    try:
        time.sleep(0.5)
        proc = subprocess.run(
            [*CLI, "record", "--pid", str(prog.pid), "--probe", "cuda:*", "--duration", "5"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        said = proc.stderr.strip().splitlines()
        assert proc.returncode != 0 and len(said) == 1, proc.stderr
        assert "not started with this tool's CUDA injection library" in said[0]
        assert "-- CMD" in said[0] and "Traceback" not in proc.stderr
    finally:
        prog.kill()
        prog.wait()


def test_what_the_program_did_not_flush_is_read_at_its_exit(app: Path, tmp_path: Path) -> None:
    """No flush of the program's own: the library's exit handler flushes, and every
    record is counted."""
    out = tmp_path / "own.json"
    snap = record(app, "cuda:*", out, "--launches", "2500", "--no-flush")
    own = json.loads(out.read_text())["launches"]
    assert {n: p["count"] for n, p in rows(snap).items()} == {
        shown_name(n): c for n, c in own.items()
    }


def test_a_name_at_a_reused_address_is_its_own_row(app: Path, tmp_path: Path) -> None:
    """Two CUTLASS-like kernels alike in their first 60 bytes, CUPTI's name for the
    second at the first's address: each counted under its own name."""
    out = tmp_path / "own.json"
    snap = record(app, "cuda:_ZN7cutlass*", out, "--launches", "0", "--reuse", "300")
    own = json.loads(out.read_text())["launches"]
    assert len(own) == 2
    assert {n: p["count"] for n, p in rows(snap).items()} == {
        shown_name(n): c for n, c in own.items()
    }


def test_another_clients_buffer_is_read_and_left_to_it(app: Path, tmp_path: Path) -> None:
    """A buffer another CUPTI client lent (registered before the tool): its records
    counted, the buffer never pooled (the pool stays 32), one line says so."""
    out = tmp_path / "own.json"
    snap, said = run_record(
        app, "cuda:*", out, "--launches", "300", "--foreign", "50", "--hoard", "40"
    )
    own = json.loads(out.read_text())
    assert own["lent"] == MAX_BUFFERS
    assert rows(snap)["_Z7foreignv"]["count"] == 50
    assert said.count("another tool lent it") == 1, said


def test_a_forked_child_neither_hangs_nor_hands_over_its_parents_records(
    app: Path, tmp_path: Path
) -> None:
    """A child forked without exec that exits through its exit handlers: the library
    does not flush there (no CUPTI thread in it), so the parent's counts stand alone."""
    out = tmp_path / "own.json"
    snap = record(app, "cuda:*", out, "--launches", "700", "--fork")
    own = json.loads(out.read_text())["launches"]
    assert {n: p["count"] for n, p in rows(snap).items()} == {
        shown_name(n): c for n, c in own.items()
    }


def test_a_users_injection_library_is_replaced_and_the_monitor_says_so(
    app: Path, tmp_path: Path
) -> None:
    """The user's environment names another tool's injection library (a profiler's):
    the command runs with the tool's (the driver loads one), its rows count every
    launch, and one snapshot says what was put aside."""
    other = tmp_path / "libother_injection.so"  # a path only: never loaded
    out = tmp_path / "own.json"
    env = {**os.environ, INJECTION_ENV: str(other)}
    proc = subprocess.run(
        [*CLI, "record", "--probe", "cuda:*", "--", str(app), "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    snaps = [json.loads(line) for line in proc.stdout.splitlines()]
    said = [w for s in snaps for w in s["warnings"] if INJECTION_ENV in w]
    assert len(said) == 1 and str(other) in said[0], said
    own = json.loads(out.read_text())
    assert {n: r["count"] for n, r in rows(snaps[-1]).items()} == {
        shown_name(n): c for n, c in own["launches"].items()
    }
