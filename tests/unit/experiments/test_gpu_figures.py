"""experiments/gpu/gpu_figures.py's checks on what an H200 really returned (results/h200/, written
by scripts/gpu_check.sh on the GPU machine), and on the same data with a fault put in:
each check must pass on the real run and fail on the fault it is there to catch."""

from __future__ import annotations

import copy
import gzip
import json
from typing import Any

import pytest

from experiments.gpu.gpu_figures import energy_truth, load_checks, process_split
from tests.support.paths import REPO

H200 = REPO / "results" / "h200"

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


# Two loads run together, as experiments/gpu/gpu_check.py's process_energy part records them:
# the collector's split at each process read (every 5 s) with the counter read beside
# it, and NVML's per-process samples (pid, timeStamp in realtime µs, smUtil in %) at
# the driver's period. Not a recording: no H200 has run this part yet; the shapes are
# those nvml_raw.json holds for the same calls.
OFFSET_S = 1.7e9  # CLOCK_REALTIME less CLOCK_MONOTONIC: NVML's µs are realtime
HEAVY, LIGHT = 4100, 4200


def two_loads() -> dict[str, Any]:
    loads = {
        "heavy": {"pid": HEAVY, "busy_from": 100.0, "busy_to": 115.0, "products": 900,
                  "product_ms": 16.0, "gpu_busy_s": 14.6},
        "light": {"pid": LIGHT, "busy_from": 100.0, "busy_to": 115.0, "products": 90,
                  "product_ms": 16.0, "gpu_busy_s": 3.1},
    }  # fmt: skip
    samples = []
    for call in range(15):  # polled every second: one entry a process, each its own time
        t = 100.5 + call
        ts = int((OFFSET_S + t) * 1e6)
        samples.append({"call": call, "t": t, "pid": HEAVY, "timeStamp": ts, "smUtil": 91})
        samples.append({"call": call, "t": t, "pid": LIGHT, "timeStamp": ts + 3_000, "smUtil": 9})
    samples.append({"call": 15, "t": 115.5, "error": "Not Found"})
    windows, split, counter, idle = [], {HEAVY: 0.0, LIGHT: 0.0}, 50_000.0, 0.0
    for k in range(5):  # process reads at 97, 102, ... 117 s
        if k:
            spent = 5 * (650.0 if k < 4 else 120.0)
            busy = 1.0 if k < 4 else 0.0
            split[HEAVY] += spent * 0.91 * busy
            split[LIGHT] += spent * 0.09 * busy
            idle += spent * (1 - busy)
            counter += spent
        windows.append(
            {"t": 97.0 + 5 * k, "counter_j": counter, "measured_j": counter - 50_000.0,
             "idle_j": idle, "by_pid": {str(p): j for p, j in split.items()}}
        )  # fmt: skip
    return {"windows": windows, "loads": loads, "samples": samples}


def test_two_loads_split_agrees_with_the_counter_and_the_work() -> None:
    r = two_loads()
    f = process_split(r["windows"], r["loads"], r["samples"])
    assert all(f["checks"].values()), f
    assert f["attributed_plus_idle_vs_counter"] == pytest.approx(1.0)
    assert f["heavy_share"]["joules"] == pytest.approx(0.91)
    assert f["heavy_share"]["work"] == pytest.approx(900 / 990, abs=1e-4)
    assert f["nvml_samples"]["most_entries_a_process_a_call"] == 1
    assert f["nvml_samples"]["time_spacing_ms"] == pytest.approx(3.0)
    assert f["attributed_while_both_busy"] == pytest.approx(1.0)
    assert f["nvml_samples"]["heavy"]["missing_while_busy"] == 0
    assert f["nvml_samples"]["calls_with_none"] == 1
    assert f["nvml_samples"]["light"]["sm_util_mean_pct"] == 9


@pytest.mark.parametrize(
    ("fault", "check"),
    [
        ("counter_high", "attributed_plus_idle_within_5pct"),
        ("light_uncharged", "both_loads_charged"),
        ("light_overcharged", "heavy_share_near_its_work"),
        ("halved", "busy_gpu_mostly_attributed"),
    ],
)
def test_each_split_check_catches_its_fault(fault: str, check: str) -> None:
    r = two_loads()
    last = r["windows"][-1]
    if fault == "counter_high":  # energy the split never saw: a window it skipped
        last["counter_j"] += 0.06 * (last["counter_j"] - r["windows"][0]["counter_j"])
    elif fault == "light_uncharged":
        last["by_pid"][str(LIGHT)] = 0.0
        last["idle_j"] += r["windows"][-2]["by_pid"][str(LIGHT)]
    elif fault == "light_overcharged":
        h, li = last["by_pid"][str(HEAVY)], last["by_pid"][str(LIGHT)]
        last["by_pid"][str(HEAVY)], last["by_pid"][str(LIGHT)] = 0.6 * (h + li), 0.4 * (h + li)
    elif fault == "halved":  # each share over both entries' times: half called idle
        for w in r["windows"]:
            half = sum(w["by_pid"].values()) / 2
            w["by_pid"] = {pid: j / 2 for pid, j in w["by_pid"].items()}
            w["idle_j"] += half
    checks = process_split(r["windows"], r["loads"], r["samples"])["checks"]
    assert not checks[check]
    assert sum(not ok for ok in checks.values()) == 1, checks


def test_missing_samples_are_counted_and_one_read_is_no_split() -> None:
    r = two_loads()
    dropped = [s for s in r["samples"] if s.get("pid") != HEAVY or s["call"] % 5]
    seen = process_split(r["windows"], r["loads"], dropped)["nvml_samples"]
    assert seen["heavy"]["missing_while_busy"] == len(r["samples"]) - len(dropped) > 0
    assert seen["light"]["missing_while_busy"] == 0
    assert "error" in process_split(r["windows"][:1], r["loads"], r["samples"])
