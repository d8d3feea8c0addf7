"""gpu_check's cuda_kernels part: `cuda:` rows on a real GPU against what the program
itself counted and timed (cuda_kernels_app.py).

1. Rows: `record --probe 'cuda:*' --budget 100` over irregular launches of four kernels:
   each row's count equal to the program's launches, its device time (mean x timed)
   within 5% of the program's CUDA events, every launch timed.
2. Cost: launches/s of a loop of empty kernels under `record` (timing on) against the
   same loop alone, alternated: the median ratio >= 0.95.
3. Memory: the process's resident memory over 100,000 launches, then 100,000 more from a
   CUDA graph, under `record` and alone: what it grows by under `record` beyond what it
   grows alone, over the second half of each (the library's buffer pool, bounded at
   8 MiB, fills before), <= 1 MiB.
4. Which libcupti the injection library chose by itself (none is named to it), and
   whether nsys is here to compare with.

The checks (rows_check, cost_check, memory_check) take what the runs wrote and nothing
else, so that tests can hold them to a fault put in.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TIME_TOLERANCE = 0.05
COST_GOAL = 0.95
LEAK_KIB = 1024  # what may grow over the second half under record beyond alone
ROUNDS = 3  # alternations of the cost loop, alone and under record
SHORT_LAUNCHES = 100_000
MEMORY_LAUNCHES = 100_000
LD_BEFORE = "ADAPTYST_GPU_LD_BEFORE"  # gpu_check.sh: the program's own library path


def row_name(kernel: str) -> str:
    """KERNEL's row's name, as the monitor shows it (whole: its layer's name site)."""
    from adaptyst_top.collectors.probes.kinds.device_layer import shown_name as name

    return name(kernel)


def rows_check(own: dict[str, Any], snap: dict[str, Any]) -> dict[str, Any]:
    """The rows of SNAP (record's last line) against the program's own counts and
    CUDA-event times (OWN)."""
    rows = {p["name"]: p for p in snap.get("probes", []) if not p["name"].startswith("[")}
    want = {row_name(n): c for n, c in own["launches"].items()}
    got = {n: p.get("count") for n, p in rows.items()}
    names = {}
    for kernel, ms in own["event_ms"].items():
        row = rows.get(row_name(kernel), {})
        timed, mean = row.get("timed") or 0, row.get("mean_ns")
        device_ms = mean * timed / 1e6 if mean is not None else None
        ratio = device_ms / ms if device_ms is not None and ms > 0 else None
        names[kernel] = {
            "launches": own["launches"][kernel],
            "count": row.get("count"),
            "timed": timed,
            "event_ms": round(ms, 3),
            "device_ms": None if device_ms is None else round(device_ms, 3),
            "device_over_events": None if ratio is None else round(ratio, 4),
        }
    total_ev = sum(own["event_ms"].values())
    total_dev = sum(v["device_ms"] or 0.0 for v in names.values())
    within = all(
        v["device_over_events"] is not None and abs(v["device_over_events"] - 1) <= TIME_TOLERANCE
        for v in names.values()
    )
    all_timed = all(v["timed"] == v["launches"] for v in names.values())
    other = {p["name"]: p.get("count") for p in snap.get("probes", []) if p["name"].startswith("[")}
    result = {
        "counts_equal": got == want,
        "every_launch_timed": all_timed,
        "device_over_events_total": round(total_dev / total_ev, 4) if total_ev else None,
        "names": names,
        "other_rows": other,
        "verdict": "pass" if got == want and within and all_timed else "fail",
    }
    if result["verdict"] == "fail":
        result["failed"] = {"want": want, "got": got}
    return result


def counts_match(own: dict[str, Any], snap: dict[str, Any]) -> bool:
    """Every launch the program made, counted in the kernel rows."""
    got = sum(p.get("count") or 0 for p in snap.get("probes", []) if not p["name"].startswith("["))
    made = sum(n for k, n in own["launches"].items() if not k.startswith("["))
    return int(got) == int(made)


def cost_check(alone: list[float], probed: list[float]) -> dict[str, Any]:
    """Launches/s of the empty-kernel loop alone and under record, each round."""
    ratio = statistics.median(probed) / statistics.median(alone)
    result = {
        "alone_launches_per_s": [round(x) for x in alone],
        "probed_launches_per_s": [round(x) for x in probed],
        "ratio": round(ratio, 4),
        "goal": COST_GOAL,
        "verdict": "pass" if ratio >= COST_GOAL else "fail",
    }
    if ratio < COST_GOAL:
        result["failed"] = f"timing on keeps {ratio:.3f} of the launch rate (goal {COST_GOAL})"
    return result


def growth(samples: list[int]) -> int:
    """Over the second half: the library's buffer pool fills by need (up to 8 MiB, its
    bound), early; what grows after that is a leak."""
    late = samples[len(samples) // 2 :]
    return late[-1] - late[0] if len(late) >= 2 else 0


def memory_check(alone: dict[str, Any], probed: dict[str, Any]) -> dict[str, Any]:
    """Resident memory over the second half, plain launches and graph ones."""
    result: dict[str, Any] = {}
    for series in ("rss_kib_plain", "rss_kib_graph"):
        extra = growth(probed[series]) - growth(alone[series])
        result[series] = {
            "alone": alone[series],
            "probed": probed[series],
            "extra_growth_kib": extra,
            "verdict": "pass" if extra <= LEAK_KIB else "fail",
        }
        if extra > LEAK_KIB:
            result[series]["failed"] = f"grew {extra} KiB more than alone"
    return result


def target(mode: str, out: Path, launches: int) -> list[str]:
    """The program, with the library path it had before gpu_check.sh added bcc's."""
    before = os.environ.get(LD_BEFORE)
    env = ["env", f"LD_LIBRARY_PATH={before}"] if before else ["env", "-u", "LD_LIBRARY_PATH"]
    if before is None:  # bcc was the machine's own: nothing was added
        env = []
    app = [sys.executable, "-m", "experiments.gpu.cuda_kernels_app", mode]
    return [*env, *app, "--out", str(out), "--launches", str(launches)]


def under_record(cmd: list[str], extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    rec = [sys.executable, "-m", "adaptyst_top.cli.start", "record", "--probe", "cuda:*"]
    proc = subprocess.run(
        [*rec, "--budget", "100", "--interval", "1", "--", *cmd],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(extra_env or {})},
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"record exited {proc.returncode}: {proc.stderr[-2000:]}")
    return {"snap": json.loads(proc.stdout.splitlines()[-1]), "stderr": proc.stderr[-2000:]}


def alone(cmd: list[str]) -> None:
    subprocess.run(cmd, cwd=ROOT, check=True, timeout=300)


def cupti_on_disk() -> list[str]:
    """The CUPTIs pip or a toolkit put on this machine (for a second try, named)."""
    places = [f"{p}/nvidia/*/lib/libcupti.so.*" for p in sys.path if p]
    places += [
        "/usr/local/cuda*/extras/CUPTI/lib64/libcupti.so.*",
        "/usr/local/cuda*/lib*/libcupti.so.*",
    ]
    return sorted({f for pattern in places for f in glob.glob(pattern)})


def cuda_kernels(out: Path, scratch: Path) -> dict[str, Any]:
    from adaptyst_top.collectors.probes.bpf.ebpf_env import smoke_test
    from adaptyst_top.collectors.probes.kinds.cuda import inject_path

    result: dict[str, Any] = {
        "injection_library": inject_path(),
        "ebpf": smoke_test().detail,
        "cupti_on_disk": cupti_on_disk(),
        "nsys": shutil.which("nsys") or "absent",
    }
    own_file = scratch / "irregular.json"
    run = under_record(target("irregular", own_file, 3000))
    own = json.loads(own_file.read_text())
    result["cupti_chosen"] = own["cupti"]
    named: dict[str, str] = {}
    if not own["cupti"] and result["cupti_on_disk"]:  # the search found none: name one
        newest = max(
            result["cupti_on_disk"], key=lambda f: int(f.rsplit(".so.", 1)[1].split(".")[0])
        )
        named = {"ADAPTYST_CUPTI": newest}  # the newest major: the image's CUDA is 13
        run = under_record(target("irregular", own_file, 3000), named)
        own = json.loads(own_file.read_text())
        result["cupti_named"] = own["cupti"]
    (out / "cuda_rows.json").write_text(json.dumps({"own": own, "snap": run["snap"]}))
    result["rows"] = rows_check(own, run["snap"])
    result["rows"]["stderr"] = run["stderr"]
    rates: dict[str, list[float]] = {"alone": [], "probed": []}
    counted = []
    for _ in range(ROUNDS):
        short = scratch / "short.json"
        alone(target("short", short, SHORT_LAUNCHES))
        rates["alone"].append(json.loads(short.read_text())["launches_per_s"])
        snap = under_record(target("short", short, SHORT_LAUNCHES), named)["snap"]
        own_short = json.loads(short.read_text())
        rates["probed"].append(own_short["launches_per_s"])
        counted.append(counts_match(own_short, snap))
    result["cost"] = cost_check(rates["alone"], rates["probed"])
    result["cost"]["counts_equal"] = counted
    mem_alone, mem_probed = scratch / "mem_alone.json", scratch / "mem_probed.json"
    alone(target("memory", mem_alone, MEMORY_LAUNCHES))
    snap = under_record(target("memory", mem_probed, MEMORY_LAUNCHES), named)["snap"]
    probed = json.loads(mem_probed.read_text())
    result["memory"] = memory_check(json.loads(mem_alone.read_text()), probed)
    result["memory"]["counts_equal"] = counts_match(probed, snap)
    if not all(counted) or not result["memory"]["counts_equal"]:
        result["counts_failed"] = "a run's rows did not count every launch"
    return result
