"""`opencl:` rows for real: a pyopencl program on PoCL, launched by `record`, counts its
own launches and reads its own profiling events; the rows must count exactly those
launches and time them as the program's events do (within 5%), through the tool's
OpenCL layer and its USDT site."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from adaptyst_top.collectors.probes.bpf.program import WHOLE_LEN
from adaptyst_top.collectors.probes.cost.table import DEFAULT_COSTS
from adaptyst_top.collectors.probes.kinds.opencl import LAYERS_ENV, layer_path
from tests.support.cli import CLI, record_last
from tests.support.marks import requires_root
from tests.support.paths import TARGETS
from tests.support.workload import build_c

PROGRAM = TARGETS / "opencl_launches.py"

pytestmark = requires_root


def record(spec: str, out: Path, *args: str, budget_pct: str = "100") -> dict[str, Any]:
    """The last snapshot of `record --probe SPEC --budget BUDGET_PCT -- the program ARGS`
    (100%: every launch timed)."""
    program = [sys.executable, str(PROGRAM), "--out", str(out), *args]
    return record_last("--probe", spec, "--budget", budget_pct, "--", *program)[0]


def rows(snap: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in snap["probes"]}


def test_kernel_rows_count_every_launch_and_time_it_as_the_program_does(tmp_path: Path) -> None:
    out = tmp_path / "own.json"
    snap = record("opencl:*", out, "--launches", "600", "--seed", "3")
    own = json.loads(out.read_text())
    assert own["layer"]
    got = rows(snap)
    assert set(got) == set(own["launches"]), got.keys()
    for name, count in own["launches"].items():
        row = got[name]
        assert (row["kind"], row["key"], row["count"], row["timed"]) == (
            "opencl",
            name,
            count,
            count,
        )
        assert row.get("error") is None
    for name, total in own["device_ns"].items():
        measured = got[name]["count"] * got[name]["mean_ns"]
        assert measured == pytest.approx(total, rel=0.05), name
        assert got[name]["p50_ns"] <= got[name]["max_ns"]


def test_a_glob_shows_the_kernels_it_names_only(tmp_path: Path) -> None:
    out = tmp_path / "own.json"
    snap = record("opencl:s*", out, "--launches", "200")
    own = json.loads(out.read_text())["launches"]
    got = rows(snap)
    assert set(got) == {"scale", "square"}
    assert all(got[n]["count"] == own[n] for n in got)


def test_under_a_small_budget_every_launch_is_counted_and_some_are_timed(tmp_path: Path) -> None:
    """0.1% of the time for timing: the layer times what that pays for and counts the
    rest, handed over in batches; the row says how many it timed."""
    out = tmp_path / "own.json"
    snap = record("opencl:tiny", out, "--loop", "--launches", "50000", budget_pct="0.1")
    own = json.loads(out.read_text())
    tiny = rows(snap)["tiny"]
    assert tiny["count"] == own["launches"]["tiny"] == 50000
    assert 0 < tiny["timed"] < tiny["count"]
    assert 0 < tiny["p50_ns"] <= tiny["max_ns"]
    assert sum(c for _b, c in tiny["hist"]) == tiny["timed"]
    # A launch's cost, as the overhead pane shows it: mostly counted ones, cheap.
    timed_ns = DEFAULT_COSTS["opencl-kernel"].per_hit_ns
    assert DEFAULT_COSTS["opencl-count"].per_hit_ns <= tiny["overhead_ns_per_hit"] < timed_ns


def test_without_a_probe_the_layer_forwards_and_times_nothing(tmp_path: Path) -> None:
    """The layer in the environment, no probe on its site (its semaphore at 0): the
    program runs and reads its own events as without it."""
    layer = layer_path()
    assert layer is not None, "the OpenCL layer is built by the install"
    out = tmp_path / "own.json"
    env = {**os.environ, LAYERS_ENV: layer}
    subprocess.run(
        [sys.executable, str(PROGRAM), "--out", str(out), "--launches", "100"],
        env=env,
        check=True,
        timeout=120,
    )
    own = json.loads(out.read_text())
    assert own["layer"]
    assert sum(own["launches"].values()) == 100 + 2 * 2
    assert all(v > 0 for v in own["device_ns"].values())


def test_a_process_not_launched_with_the_layer_has_its_launches_counted_from_the_host(
    tmp_path: Path,
) -> None:
    """--pid on a program started without the layer: its kernels cannot be timed on the
    device; its launches are counted (and timed on the host) by a uprobe on the loader
    it maps (pyopencl's own copy), and one line says so."""
    out = str(tmp_path / "own.json")
    # Held 12 s before its launches: the monitor attaches well within that, busy or not.
    argv = [
        sys.executable,
        str(PROGRAM),
        "--out",
        out,
        "--hold",
        "12",
        "--loop",
        "--launches",
        "3000",
    ]
    prog = subprocess.Popen(argv)
    try:
        time.sleep(1.5)  # OpenCL loaded, holding
        proc = subprocess.run(
            [*CLI, "record", "--pid", str(prog.pid), "--probe", "opencl:*", "--duration", "60"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        last = json.loads(proc.stdout.splitlines()[-1])
        (row,) = last["probes"]
        assert (row["kind"], row["name"], row["count"]) == (
            "uprobe",
            "clEnqueueNDRangeKernel",
            3000,
        )
        lines = [json.loads(x) for x in proc.stdout.splitlines()]
        (said,) = {
            w for snap in lines for w in snap.get("warnings", ()) if w.startswith("opencl:*")
        }
        assert "not started with this tool's OpenCL layer" in said and "-- CMD" in said
    finally:
        prog.kill()
        prog.wait()


def test_a_hostile_app_floods_and_lies_at_its_own_cost(tmp_path: Path) -> None:
    """cl_flood.c: 200,000 launches over 5,000 kernels, each named anew (some 299 bytes
    long), under a "runtime" whose events report random timestamps and fail one time in
    three. Every launch is counted; the names stay bounded (the rest are [other]); every
    figure is finite; the session ends as the app does, with no line but the exit's."""
    flood = build_c(TARGETS / "cl_flood.c", tmp_path, "-O2")
    proc = subprocess.run(
        [
            *CLI,
            "record",
            "--probe",
            "opencl:*",
            "--budget",
            "100",
            "--",
            str(flood),
            "200000",
            "5000",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    last = json.loads(proc.stdout.splitlines()[-1])
    probes = last["probes"]
    assert sum(p["count"] for p in probes) == 200000
    assert len(probes) <= 1024 + 1 and "[other]" in {p["name"] for p in probes}
    # Whole where they fit the names map, a cut one ending in its key's hash.
    assert all(len(p["name"].encode()) < WHOLE_LEN for p in probes)
    (cut,) = [p["name"] for p in probes if p["name"].startswith("xxxx")]
    assert cut[: WHOLE_LEN - 10] == "x" * (WHOLE_LEN - 10) and cut[-9] == "~"
    for p in probes:
        assert 0 <= (p.get("timed") or 0) <= p["count"]
        for field in ("mean_ns", "p50_ns", "p99_ns", "max_ns"):
            assert p.get(field) is None or math.isfinite(p[field]), (p["name"], field)
    assert all("exited" in w for w in last["warnings"]), last["warnings"]


def test_kernels_on_pocls_cpu_device_are_charged_the_cpus_energy(tmp_path: Path) -> None:
    """PoCL's device is the host's CPU: its kernels' device time is CPU time, and the
    rows get their share of the CPU's energy by it (the power model here: no RAPL)."""
    out = tmp_path / "own.json"
    program = [sys.executable, str(PROGRAM), "--out", str(out), "--launches", "30000"]
    options = ["--probe", "opencl:*", "--budget", "100", "--cpu-power-model", "20:120"]
    proc = subprocess.run(
        [*CLI, "record", *options, "--", *program],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    last = json.loads(proc.stdout.splitlines()[-1])
    own = json.loads(out.read_text())
    got = rows(last)
    if not own["cpu_device"]:  # the machine's first OpenCL device is not its CPU
        assert all("cpu_ns" not in p for p in got.values())
        return
    for name, total in own["device_ns"].items():
        assert got[name]["cpu_ns"] == pytest.approx(total, rel=0.05), name
    split = {s["device"]: s for s in last.get("energy_split") or []}
    if "cpu" in split:  # the CPU's energy was split (10 ticks of the node busy: here, yes)
        charged = [p["energy_j"] for p in last["probes"] if p.get("energy_j") is not None]
        assert len(charged) == len(own["launches"]) and all(j > 0 for j in charged)
        assert sum(charged) == pytest.approx(split["cpu"]["attributed_j"], rel=1e-6)
        assert split["cpu"]["attributed_j"] <= split["cpu"]["measured_j"]
        assert {p["energy_method"] for p in last["probes"]} == {split["cpu"]["method"]}


def test_clpeaks_kernels_counted_as_the_loader_sees_them_launched() -> None:
    """clpeak (Debian's, nobody here wrote it; C++ on the system's ocl-icd): its kernel
    launches counted by the layer's rows equal the launches a uprobe on the loader's
    clEnqueueNDRangeKernel counts in the same run, and every one is timed."""
    probes = ["--probe", "opencl:*", "--probe", "uprobe:OpenCL:clEnqueueNDRangeKernel"]
    proc = subprocess.run(
        [*CLI, "record", "--budget", "100", *probes, "--", "clpeak", "--kernel-latency"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    entries = json.loads(proc.stdout.splitlines()[-1])["probes"]
    kernels = [p for p in entries if p["kind"] == "opencl"]
    (host,) = [p for p in entries if p["kind"] == "uprobe"]
    assert host["count"] >= 1000
    assert sum(p["count"] for p in kernels) == host["count"]
    assert all(p["timed"] == p["count"] and p["mean_ns"] > 0 for p in kernels)
