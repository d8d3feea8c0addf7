"""The figures and checks of gpu_check.py, from what it recorded: pure functions,
so that they are tested here on recorded shapes while the run itself needs a GPU.

Times are CLOCK_MONOTONIC seconds. A record line at `t` (seconds after the recording
started) holds readings of the interval that ends there.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from typing import Any

GIB = 1 << 30
CONTEXT_MAX_BYTES = GIB  # a CUDA context and cuBLAS workspace, beyond what cupy holds
ENERGY_AGREE = 0.02  # the bound between the counter and integrated power
SPLIT_AGREE = 0.05  # #35: attributed + idle against the counter over the same interval
SHARE_NEAR = 0.10  # #35: the heavy load's share of joules against its share of SM time
BUSY_ATTRIBUTED = 0.8  # of the energy while a GEMM loop keeps the SMs busy

Sample = tuple[float, float | None, float | None, float | None]  # t, instant W, avg W, J


def _gpu(line: dict[str, Any]) -> dict[str, Any] | None:
    return next((d for d in line.get("devices", []) if d.get("kind") == "gpu"), None)


def _median(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def _proc(gpu: dict[str, Any], pid: int) -> dict[str, Any] | None:
    procs = gpu.get("extra", {}).get("processes", [])
    return next((p for p in procs if p.get("pid") == pid), None)


def load_checks(
    lines: Sequence[dict[str, Any]], load: dict[str, Any], rec_start: float
) -> dict[str, Any]:
    """The GPU's readings before, during and after the load, against what it did."""
    ticks = [(rec_start + line["t"], g) for line in lines if (g := _gpu(line)) is not None]
    if not ticks:
        return {"error": "no GPU in the recording"}
    pid = load["pid"]

    def within(a: float, b: float) -> list[dict[str, Any]]:
        return [g for t, g in ticks if t - 1.0 >= a and t <= b]

    baseline = ticks[0][1]
    busy = within(load["busy_from"], load["busy_to"])
    # One interval for utilisation to fall: NVML's sample period is up to 1 s.
    after = within(load["busy_to"] + 1.0, load.get("exited_at", float("inf")))
    held = within(load["allocated_at"], load.get("exited_at", float("inf")))
    gone = within(load.get("exited_at", float("inf")) + 0.5, float("inf"))
    procs = [p for g in held if (p := _proc(g, pid)) is not None]
    proc_mem = max((p["mem_bytes"] for p in procs if p.get("mem_bytes") is not None), default=None)
    sm = max((p["sm_util"] for p in procs if p.get("sm_util") is not None), default=None)
    held_mem = _median([g.get("mem_used_bytes") for g in held])
    base_mem = baseline.get("mem_used_bytes")
    device_delta = None if held_mem is None or base_mem is None else held_mem - base_mem
    cupy = load["cupy_pool_bytes"]
    idle_w, busy_w = baseline.get("power_w"), _median([g.get("power_w") for g in busy])
    after_w = _median([g.get("power_w") for g in after])
    util_busy = _median([g.get("util") for g in busy])
    util_after = max((g["util"] for g in after if g.get("util") is not None), default=None)
    checks = {
        "util_above_90pct_under_load": util_busy is not None and util_busy > 0.9,
        "util_falls_after": util_after is not None and util_after < 0.1,
        "power_follows": None not in (idle_w, busy_w, after_w)
        and busy_w > idle_w + 50  # type: ignore[operator]
        and after_w < (idle_w + busy_w) / 2,  # type: ignore[operator]
        "device_memory_matches_cupy": device_delta is not None
        and cupy <= device_delta <= cupy + CONTEXT_MAX_BYTES,
        "process_memory_matches_cupy": proc_mem is not None
        and cupy <= proc_mem <= cupy + CONTEXT_MAX_BYTES,
        "process_named_with_sm_share": sm is not None and sm > 0.5,
    }
    return {
        "ticks": len(ticks),
        "busy_ticks": len(busy),
        "util_idle": baseline.get("util"),
        "util_busy_median": util_busy,
        "util_after_max": util_after,
        "power_idle_w": idle_w,
        "power_busy_median_w": busy_w,
        "power_after_median_w": after_w,
        "mem_baseline_bytes": base_mem,
        "mem_held_median_bytes": held_mem,
        "device_mem_delta_bytes": device_delta,
        "cupy_pool_bytes": cupy,
        "process_mem_bytes": proc_mem,
        "process_sm_util_max": sm,
        "process_seen_in_ticks": len(procs),
        "mem_after_exit_bytes": _median([g.get("mem_used_bytes") for g in gone]),
        "process_listed_after_exit": any(_proc(g, pid) is not None for g in gone[1:]),
        "energy_methods": sorted({str(g.get("energy_method")) for _, g in ticks}),
        "checks": checks,
    }


def _trapezoid(points: Sequence[tuple[float, float]]) -> float:
    return sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in itertools.pairwise(points))


def _update_period(points: Sequence[tuple[float, float]]) -> float | None:
    """Median time between changes of a reading: how often the driver refreshes it."""
    changes = [b[0] for a, b in itertools.pairwise(points) if b[1] != a[1]]
    gaps = [b - a for a, b in itertools.pairwise(changes)]
    return statistics.median(gaps) if gaps else None


def energy_truth(samples: Sequence[Sample], lines: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The energy counter against integrated power over the same samples' span."""
    full = [s for s in samples if None not in s]
    if len(full) < 2:
        return {"error": "fewer than two samples with power and counter"}
    span = full[-1][0] - full[0][0]
    counter_j = full[-1][3] - full[0][3]  # type: ignore[operator]
    instant_j = _trapezoid([(s[0], s[1]) for s in full])  # type: ignore[misc]
    average_j = _trapezoid([(s[0], s[2]) for s in full])  # type: ignore[misc]
    gpus = [g for line in lines if (g := _gpu(line)) is not None and g.get("energy_j") is not None]
    recorded_j = gpus[-1]["energy_j"] - gpus[0]["energy_j"] if len(gpus) > 1 else None
    recorded_s = lines[-1]["t"] - lines[0]["t"] if len(gpus) > 1 else None
    return {
        "span_s": round(span, 3),
        "samples": len(full),
        "counter_j": round(counter_j, 2),
        "instant_power_integrated_j": round(instant_j, 2),
        "average_power_integrated_j": round(average_j, 2),
        "instant_vs_counter": round(instant_j / counter_j, 4) if counter_j else None,
        "average_vs_counter": round(average_j / counter_j, 4) if counter_j else None,
        "counter_update_s": _update_period([(s[0], s[3]) for s in full]),  # type: ignore[misc]
        "instant_update_s": _update_period([(s[0], s[1]) for s in full]),  # type: ignore[misc]
        "average_update_s": _update_period([(s[0], s[2]) for s in full]),  # type: ignore[misc]
        "recorded_j": recorded_j,
        "recorded_mean_w": recorded_j / recorded_s if recorded_j and recorded_s else None,
        "checks": {
            "counter_agrees_with_instant_power": bool(counter_j)
            and abs(instant_j / counter_j - 1) <= ENERGY_AGREE
        },
    }


def _share(a: float, b: float) -> float | None:
    return round(a / (a + b), 4) if a + b > 0 else None


def _samples_seen(
    answers: Sequence[dict[str, Any]], loads: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """What NVML's per-process answers were (ANSWERS: each entry of each call, or the
    call's error, with the call's number and CLOCK_MONOTONIC time `t`): entries a
    process a call, the spacing of their times, and the calls within each load's busy
    window that had no entry for it."""
    entries = [x for x in answers if "pid" in x]
    calls = {int(x["call"]): float(x["t"]) for x in answers}
    times = sorted({int(x["timeStamp"]) for x in entries})
    gaps = [(b - a) / 1e3 for a, b in itertools.pairwise(times)]
    per_call: dict[tuple[int, int], int] = {}
    for x in entries:
        key = (int(x["call"]), int(x["pid"]))
        per_call[key] = per_call.get(key, 0) + 1
    out: dict[str, Any] = {
        "calls": len(calls),
        "entries": len(entries),
        "calls_with_none": sum(1 for x in answers if "error" in x),
        # One entry a process a call (NVML's documented answer): the spacing of the
        # times is then the poll's, not the driver's sampling.
        "most_entries_a_process_a_call": max(per_call.values(), default=0),
        "time_spacing_ms": round(statistics.median(gaps), 1) if gaps else None,
    }
    for name, info in loads.items():
        mine = [x for x in entries if int(x["pid"]) == info["pid"]]
        with_me = {int(x["call"]) for x in mine}
        busy = [c for c, t in calls.items() if info["busy_from"] <= t <= info["busy_to"]]
        sm = [int(x["smUtil"]) for x in mine]
        out[name] = {
            "calls_while_busy": len(busy),
            "missing_while_busy": sum(1 for c in busy if c not in with_me),
            "sm_util_sum": sum(sm),
            "sm_util_mean_pct": round(statistics.fmean(sm), 1) if sm else None,
        }
    return out


def _busy_windows(
    windows: Sequence[dict[str, Any]], loads: dict[str, dict[str, Any]]
) -> float | None:
    """The share of the energy charged to processes over the windows that lie wholly
    within both loads' busy time (None: no such window)."""
    start = max(info["busy_from"] for info in loads.values())
    end = min(info["busy_to"] for info in loads.values())
    charged = measured = 0.0
    for a, b in itertools.pairwise(windows):
        if a["t"] >= start and b["t"] <= end:
            charged += sum(b["by_pid"].values()) - sum(a["by_pid"].values())
            measured += b["measured_j"] - a["measured_j"]
    return round(charged / measured, 4) if measured > 0 else None


def process_split(
    windows: Sequence[dict[str, Any]],
    loads: dict[str, dict[str, Any]],
    answers: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """The collector's per-process split of two loads running together ("heavy" and
    "light", each gpu_load.py's info) against the energy counter read at the same
    moments (WINDOWS: at each of the collector's process reads, its split so far and
    the counter), and the heavy load's share of the joules against its share of the
    GPU's work: its products times one product's time alone. ANSWERS: NVML's
    per-process answers, polled beside (_samples_seen)."""
    if len(windows) < 2:
        return {"error": "fewer than two process reads"}
    first, last = windows[0], windows[-1]
    counter_j = last["counter_j"] - first["counter_j"]
    before = {int(k): float(v) for k, v in first["by_pid"].items()}
    by_pid = {int(k): float(v) - before.get(int(k), 0.0) for k, v in last["by_pid"].items()}
    joules = {name: by_pid.get(info["pid"], 0.0) for name, info in loads.items()}
    attributed = sum(by_pid.values())
    idle = last["idle_j"] - first["idle_j"]
    work = {n: info["products"] * info["product_ms"] / 1e3 for n, info in loads.items()}
    seen = _samples_seen(answers, loads)
    shares = {
        "joules": _share(joules["heavy"], joules["light"]),
        "work": _share(work["heavy"], work["light"]),
        # Events time a burst with its waits behind the other load's kernels: not checked.
        "cuda_events": _share(loads["heavy"]["gpu_busy_s"], loads["light"]["gpu_busy_s"]),
        "nvml_sm_util": _share(seen["heavy"]["sm_util_sum"], seen["light"]["sm_util_sum"]),
    }
    agree = (attributed + idle) / counter_j if counter_j > 0 else None
    busy = _busy_windows(windows, loads)
    return {
        "span_s": round(last["t"] - first["t"], 3),
        "process_reads": len(windows),
        "counter_j": round(counter_j, 3),
        "split_j": round(last["measured_j"] - first["measured_j"], 3),
        "attributed_j": round(attributed, 3),
        "idle_j": round(idle, 3),
        "joules": {k: round(v, 3) for k, v in joules.items()},
        "work_s": {k: round(v, 3) for k, v in work.items()},
        "attributed_plus_idle_vs_counter": None if agree is None else round(agree, 4),
        "heavy_share": shares,
        "attributed_while_both_busy": busy,
        "nvml_samples": seen,
        "checks": {
            "attributed_plus_idle_within_5pct": agree is not None and abs(agree - 1) <= SPLIT_AGREE,
            "both_loads_charged": all(v > 0 for v in joules.values()),
            # The heavy load keeps the SMs busy: little of those windows is idle.
            "busy_gpu_mostly_attributed": busy is not None and busy >= BUSY_ATTRIBUTED,
            "heavy_share_near_its_work": None not in (shares["joules"], shares["work"])
            and abs(shares["joules"] - shares["work"]) <= SHARE_NEAR,  # type: ignore[operator]
        },
    }
