"""bench/gpu_figures.py's checks on what an H200 really returned (bench/h200/, written
by scripts/gpu_check.sh on the GPU machine), and on the same data with a fault put in:
each check must pass on the real run and fail on the fault it is there to catch."""

from __future__ import annotations

import copy
import gzip
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "bench" / "h200"
sys.path.insert(0, str(ROOT / "bench"))
from gpu_figures import energy_truth, load_checks  # noqa: E402

GIB = 1 << 30


@pytest.fixture(scope="module")
def run() -> dict[str, Any]:
    result = json.loads((H200 / "gpu_check.json").read_text())
    lines = [json.loads(x) for x in (H200 / "record.jsonl").read_text().splitlines()]
    samples = json.loads(gzip.decompress((H200 / "power_samples.json.gz").read_bytes()))
    part = result["telemetry_and_energy"]
    return {
        "lines": lines,
        "load": part["load"],
        "samples": samples,
        "start": part["record_started"],
    }


def start_of(run: dict[str, Any]) -> float:
    return float(run["start"])


def gpu_of(line: dict[str, Any]) -> dict[str, Any]:
    return next(d for d in line["devices"] if d["kind"] == "gpu")


def test_the_h200_run_passes_every_check(run: dict[str, Any]) -> None:
    figures = load_checks(run["lines"], run["load"], start_of(run))
    assert all(figures["checks"].values()), figures["checks"]
    assert figures["busy_ticks"] >= 8
    assert figures["power_busy_median_w"] > 5 * figures["power_idle_w"]
    energy = energy_truth(run["samples"], run["lines"])
    assert energy["checks"]["counter_agrees_with_instant_power"]
    assert energy["counter_update_s"] == pytest.approx(0.1, abs=0.01)  # the driver's 100 ms


@pytest.mark.parametrize(
    ("fault", "check"),
    [
        ("util_half", "util_above_90pct_under_load"),
        ("util_stuck", "util_falls_after"),
        ("power_flat", "power_follows"),
        ("memory_v1", "device_memory_matches_cupy"),
        ("process_other_pid", "process_named_with_sm_share"),
        ("process_mem_short", "process_memory_matches_cupy"),
    ],
)
def test_each_check_catches_its_fault(run: dict[str, Any], fault: str, check: str) -> None:
    lines = copy.deepcopy(run["lines"])
    for line in lines:
        g = gpu_of(line)
        if fault == "util_half" and g["util"] > 0.9:
            g["util"] = 0.5
        elif fault == "util_stuck":
            g["util"] = 1.0 if line["t"] > 8 else g["util"]
        elif fault == "power_flat":
            g["power_w"] = 300.0
        elif fault == "memory_v1" and line["t"] == 1.0:
            g["mem_used_bytes"] = GIB  # a baseline counting the reservation: delta too small
        for p in g["extra"]["processes"]:
            if fault == "process_other_pid":
                p["pid"] += 1
            elif fault == "process_mem_short":
                p["mem_bytes"] = GIB
    checks = load_checks(lines, run["load"], start_of(run))["checks"]
    assert not checks[check]
    assert sum(not ok for ok in checks.values()) <= 2  # the fault, not everything


def test_energy_disagreement_is_caught(run: dict[str, Any]) -> None:
    # A counter 5% above what power integrates to: the Zeus check fails.
    samples = [(t, w, a, None if c is None else c * 1.05) for t, w, a, c in run["samples"]]
    assert not energy_truth(samples, run["lines"])["checks"]["counter_agrees_with_instant_power"]
    assert "error" in energy_truth(run["samples"][:1], run["lines"])
