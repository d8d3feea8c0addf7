"""The NVIDIA path on a real GPU, in one run (scripts/gpu_check.sh calls it).

1. Telemetry: `record --duration 26 --interval 1` while gpu_load.py idles, runs a
   GEMM loop at full load for 10 s and idles again: utilisation, power, memory and the
   per-process entries are checked against what the load did.
2. Energy truth: over the same window, the NVML total-energy counter against instant
   power integrated (trapezoid, samples every 10 ms), and against the 1 s average power.
3. Per-process energy (#35): a heavy cupy load (root) and a light one (uid 65534 where
   the machine lets it) at once; the collector's per-process split against the energy
   counter read at each of its process reads, and the heavy load's share of the joules
   against its share of the GPU's work; NVML's per-process samples as they came.
4. Placement: experiments/placement/placement_eval.py --warm on CPU vs CUDA cases
   (energy with NVML power; cold against the goal of >= 0.8x the best static device,
   and against the last H200 run's figures, results/h200/), and each case's energy per
   run from NVML's counter over >= 1 s of runs, and on CUDA from the collector's split
   for this process.
5. Dask: bench/dask_eval.py with one worker offering `cuda`, one the CPU alone.
6. The cost of one device sweep with a real GPU against `nvidia-smi --query-gpu`.
7. An ordinary user's view (uid 65534) while root's load runs: NVML works for the user,
   and the load shows only as another user's process.
8. `cuda:` rows (cuda_rows.py): counts and device times against a CuPy program's own
   launches and CUDA events, the launch rate with timing on, memory over 100,000
   launches and a CUDA graph's.

Every part's failure is reported and the others still run. Writes to --out:
gpu_check.json (figures and checks), nvml_raw.json (what each NVML call returned, as
the fakes in tests/ must return it), record.jsonl, power_samples.json,
placement_rows.json, dask_cuda.json, sweep.json, cuda_rows.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from experiments.gpu.cuda_rows import cuda_kernels
from experiments.gpu.gpu_figures import energy_truth, load_checks, process_split

ROOT = Path(__file__).resolve().parents[2]  # the repository: every script runs from it
GPU_LOAD = Path(__file__).with_name("gpu_load.py")
PLACEMENT = ROOT / "experiments" / "placement"
H200 = ROOT / "results" / "h200"  # the last H200 run's results

SAMPLE_EVERY_S = 0.01
PARTS = (
    "user_view",
    "nvml_raw",
    "telemetry_and_energy",
    "process_energy",
    "placement",
    "dask_cuda",
    "sweep",
    "cuda_kernels",
)


def plain(v: Any) -> Any:
    """An NVML answer (ctypes structures, arrays, bytes) as JSON."""
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    fields = getattr(v, "_fields_", None)
    if fields is not None:
        return {name: plain(getattr(v, name)) for name, *_ in fields}
    if hasattr(v, "__dict__"):  # pynvml's nvmlFriendlyObject (process lists)
        return {k: plain(x) for k, x in vars(v).items()}
    try:
        return [plain(x) for x in v]
    except TypeError:
        return repr(v)


def device_calls(n: Any, h: Any) -> dict[str, Callable[[], Any]]:
    """The NVML calls the collector makes on one GPU, by name."""
    return {
        "nvmlDeviceGetName": lambda: n.nvmlDeviceGetName(h),
        "nvmlDeviceGetUUID": lambda: n.nvmlDeviceGetUUID(h),
        "nvmlDeviceGetPciInfo": lambda: n.nvmlDeviceGetPciInfo(h),
        "nvmlDeviceGetUtilizationRates": lambda: n.nvmlDeviceGetUtilizationRates(h),
        "nvmlDeviceGetMemoryInfo": lambda: n.nvmlDeviceGetMemoryInfo(h),
        "nvmlDeviceGetMemoryInfo_v2": lambda: n.nvmlDeviceGetMemoryInfo(h, n.nvmlMemory_v2),
        "nvmlDeviceGetPowerUsage": lambda: n.nvmlDeviceGetPowerUsage(h),
        "nvmlDeviceGetFieldValues_POWER_INSTANT": lambda: n.nvmlDeviceGetFieldValues(
            h, [n.NVML_FI_DEV_POWER_INSTANT]
        ),
        "nvmlDeviceGetTotalEnergyConsumption": lambda: n.nvmlDeviceGetTotalEnergyConsumption(h),
        "nvmlDeviceGetTemperature": lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
        "nvmlDeviceGetClockInfo_SM": lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
        "nvmlDeviceGetMigMode": lambda: n.nvmlDeviceGetMigMode(h),
        "nvmlDeviceGetMaxMigDeviceCount": lambda: n.nvmlDeviceGetMaxMigDeviceCount(h),
        "nvmlDeviceGetComputeRunningProcesses": lambda: n.nvmlDeviceGetComputeRunningProcesses(h),
        "nvmlDeviceGetProcessUtilization": lambda: n.nvmlDeviceGetProcessUtilization(h, 0),
        "nvmlDeviceGetEnforcedPowerLimit": lambda: n.nvmlDeviceGetEnforcedPowerLimit(h),
    }


def nvml_raw(n: Any, reps: int = 20) -> dict[str, Any]:
    """Every NVML call the collector makes, once as data, timed over `reps` calls."""
    out: dict[str, Any] = {}
    for name, call in (
        ("driver", n.nvmlSystemGetDriverVersion),
        ("nvml", n.nvmlSystemGetNVMLVersion),
        ("cuda_driver", n.nvmlSystemGetCudaDriverVersion),
    ):
        out[name] = plain(call())
    gpus = []
    for i in range(n.nvmlDeviceGetCount()):
        h = n.nvmlDeviceGetHandleByIndex(i)
        calls = device_calls(n, h)
        gpu: dict[str, Any] = {}
        for name, call in calls.items():
            entry: dict[str, Any] = {}
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                try:
                    value = call()
                except Exception as exc:  # the error is the finding
                    entry = {"error": type(exc).__name__, "message": str(exc)}
                    break
                times.append(time.perf_counter() - t0)
                entry = {"value": plain(value)}
            if times:
                entry["median_us"] = round(statistics.median(times) * 1e6, 1)
            gpu[name] = entry
        gpus.append(gpu)
    out["gpus"] = gpus
    return out


class PowerSampler(threading.Thread):
    """Instant power, 1 s average power and the energy counter of GPU 0, every 10 ms."""

    def __init__(self, n: Any) -> None:
        super().__init__(daemon=True)
        self.n = n
        self.h = n.nvmlDeviceGetHandleByIndex(0)
        self.samples: list[tuple[float, float | None, float | None, float | None]] = []
        self.stop = threading.Event()

    def _read(self, f: Callable[[], float]) -> float | None:
        try:
            return f()
        except self.n.NVMLError:
            return None

    def _instant_w(self) -> float:
        v = self.n.nvmlDeviceGetFieldValues(self.h, [self.n.NVML_FI_DEV_POWER_INSTANT])[0]
        if v.nvmlReturn != self.n.NVML_SUCCESS:
            raise self.n.NVMLError(v.nvmlReturn)
        return float(v.value.uiVal) / 1000.0

    def run(self) -> None:
        n, h = self.n, self.h
        while not self.stop.is_set():
            t = time.monotonic()
            self.samples.append(
                (
                    t,
                    self._read(self._instant_w),
                    self._read(lambda: n.nvmlDeviceGetPowerUsage(h) / 1000.0),
                    self._read(lambda: n.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0),
                )
            )
            self.stop.wait(max(0.0, SAMPLE_EVERY_S - (time.monotonic() - t)))


def module_cmd(module: str, *args: str) -> list[str]:
    """A module run by this Python (a script of this checkout's imports name the
    repository's packages: run it from ROOT)."""
    return [sys.executable, "-m", module, *args]


def start_load(info: Path, *timing: str) -> subprocess.Popen[bytes]:
    """gpu_load.py, writing what it did to INFO (TIMING: its idle and busy options)."""
    return subprocess.Popen(
        module_cmd("experiments.gpu.gpu_load", "--info", str(info), *timing), cwd=ROOT
    )


def telemetry_and_energy(n: Any, out: Path, scratch: Path, record_s: float) -> dict[str, Any]:
    rec_path = out / "record.jsonl"
    info_path = scratch / "load_info.json"
    sampler = PowerSampler(n)
    sampler.start()
    rec = subprocess.Popen(
        module_cmd(
            "adaptyst_top.cli.start",
            "record",
            "--duration",
            str(record_s),
            "--interval",
            "1",
            "--out",
            str(rec_path),
        )
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (rec_path.exists() and rec_path.stat().st_size):
        time.sleep(0.02)
    rec_start = time.monotonic() - 1.0  # the first line is written one interval in
    load = start_load(info_path)
    raw_under_load = None
    while load.poll() is None:
        time.sleep(0.1)
        if raw_under_load is None and info_path.exists():
            started = json.loads(info_path.read_text())["allocated_at"]
            if time.monotonic() > started + 6.0:  # 3 s into the GEMM loop
                raw_under_load = nvml_raw(n, reps=1)
    rc = rec.wait(timeout=record_s + 60)
    sampler.stop.set()
    sampler.join()
    lines = [json.loads(x) for x in rec_path.read_text().splitlines() if x.strip()]
    info = json.loads(info_path.read_text())
    (out / "power_samples.json").write_text(json.dumps(sampler.samples))
    return {
        "record_status": rc,
        "load_status": load.returncode,
        "nvml_raw_under_load": raw_under_load,
        "load": info,
        "record_started": rec_start,
        "telemetry": load_checks(lines, info, rec_start),
        "energy": energy_truth(sampler.samples, lines),
    }


NOBODY = 65534
USER_ENV = ("PATH", "LD_LIBRARY_PATH", "LANG", "CUDA_VISIBLE_DEVICES", "CUDA_PATH", "CUDA_HOME")


def user_dirs() -> tuple[Path, Path]:
    """(HOME, WORK): HOME root's (0711: the user reaches what is named in it, lists
    nothing, changes nothing), WORK inside it the user's own. Root writes only in HOME,
    so no path it writes to is one the user (or any other uid 65534 process) can point
    elsewhere."""
    home = Path(tempfile.mkdtemp(prefix="gpu_check-nobody-"))
    home.chmod(0o711)
    work = home / "w"
    work.mkdir(mode=0o700)
    os.chown(work, NOBODY, NOBODY)
    (home / "gpu_load.py").write_bytes(GPU_LOAD.read_bytes())  # it imports nothing of ours
    (home / "gpu_load.py").chmod(0o644)
    return home, work


def start_as_nobody(home: Path, info: Path, err: Path, *timing: str) -> subprocess.Popen[bytes]:
    """gpu_load.py as uid 65534, from root's copy in HOME (the checkout and the private
    wheels may be out of its reach), with only the environment it needs (a process's
    environment is readable by its user); its stderr to ERR, a file of root's."""
    env = {k: v for k, v in os.environ.items() if k in USER_ENV or k.startswith("NVIDIA_")}
    env.update(HOME=str(info.parent), CUPY_CACHE_DIR=str(info.parent / "cupy"))
    with err.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, str(home / "gpu_load.py"), "--info", str(info), *timing],
            user=NOBODY,
            group=NOBODY,
            extra_groups=[],
            env=env,
            cwd=info.parent,
            stderr=out,
        )


def read_json(path: Path) -> Any:
    """A file another user wrote: never through a link, never a FIFO that blocks."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path}: not a regular file")
        return json.loads(f.read(1 << 20))


def info_of(path: Path) -> dict[str, Any]:
    """A load's info, or why there is none (its failure is a finding, not a crash)."""
    try:
        info: dict[str, Any] = read_json(path)
    except (OSError, ValueError) as e:
        return {"failed": f"{path.name}: {e}"}
    return info


def wait_info(load: subprocess.Popen[bytes], info: Path, timeout_s: float = 90) -> bool:
    deadline = time.monotonic() + timeout_s
    while load.poll() is None and not info.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return info.exists()


def process_energy(n: Any, scratch: Path) -> dict[str, Any]:
    """#35.1: two cupy loads at once, a heavy one (root, GEMMs back to back) and a light
    one (uid 65534 where the machine lets it, a product at a time, busy 30% of the time); the
    collector's per-process split against the energy counter read at each process read,
    and NVML's per-process answers polled every second beside it."""
    from adaptyst_top.collectors.devices.nvml import NvmlCollector

    busy_s, after_s = 20.0, 8.0  # after: both still listed at the last process read
    home, work = user_dirs()
    go = home / "go"
    timing = ("--go", str(go), "--busy", str(busy_s), "--idle-after", str(after_s))
    light_info, heavy_info, err = work / "light.json", scratch / "heavy.json", scratch / "err"
    light_as = "uid 65534"
    loads: dict[str, subprocess.Popen[bytes]] = {}
    collector = None
    try:
        loads["light"] = start_as_nobody(home, light_info, err, *timing, "--duty", "0.3")
        if not wait_info(loads["light"], light_info):
            loads["light"].kill()
            loads["light"].wait()
            light_as = "root: as uid 65534 it failed: " + err.read_text(errors="replace")[-400:]
            light_info = scratch / "light.json"
            loads["light"] = start_load(light_info, *timing, "--duty", "0.3")
            wait_info(loads["light"], light_info)
        loads["heavy"] = start_load(heavy_info, *timing)
        wait_info(loads["heavy"], heavy_info)
        collector = NvmlCollector(n)
        if not collector.gpus:
            raise RuntimeError(f"NVML: {collector.reason or 'no GPU'}")
        gpu = collector.gpus[0]
        h = gpu.handle
        busy_at = time.monotonic() + 6  # a process read or two before
        (home / "go.tmp").write_text(repr(busy_at))
        (home / "go.tmp").chmod(0o644)
        (home / "go.tmp").replace(go)
        windows, answers, last_ts, call = [], [], 0, 0
        while time.monotonic() < busy_at + busy_s + after_s - 1.5:
            before = gpu.processes_at
            collector.read()
            if gpu.processes_at != before:  # a process read: the split moved on
                windows.append(
                    {
                        "t": time.monotonic(),
                        "counter_j": n.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0,
                        "measured_j": gpu.split.measured_j,
                        "idle_j": gpu.split.idle_j,
                        "by_pid": dict(gpu.split.by_pid),
                    }
                )
            call, t = call + 1, time.monotonic()
            try:
                got = n.nvmlDeviceGetProcessUtilization(h, last_ts)
            except n.NVMLError as e:  # NOT_FOUND: no sample since last_ts
                got = []
                answers.append({"call": call, "t": t, "error": str(e)})
            for x in got:
                answers.append(
                    {
                        "call": call,
                        "t": t,
                        **{k: plain(getattr(x, k)) for k in ("pid", "timeStamp", "smUtil")},
                    }
                )
                last_ts = max(last_ts, int(x.timeStamp))
            time.sleep(1.0)
    finally:
        if collector is not None:
            collector.close()
        status = {}
        for name, load in loads.items():
            if not go.exists():  # it would wait for a start that never comes
                load.kill()
            try:
                status[name] = load.wait(timeout=60)
            except subprocess.TimeoutExpired:
                load.kill()
                status[name] = load.wait()
        done = {"light": info_of(light_info), "heavy": info_of(heavy_info)}
        shutil.rmtree(home, ignore_errors=True)
    out: dict[str, Any] = {
        "light_as": light_as,
        "exit_status": status,
        "loads": done,
        "windows": windows,
        "nvml_answers": answers,
    }
    try:
        out["figures"] = process_split(windows, done, answers)
    except Exception:  # the raw data above still comes back
        out["figures"] = {"failed": traceback.format_exc()}
    return out


def energy_per_run(n: Any, cases: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each case's input on each device: NVML counter over >= 1 s of runs, per run, and
    the same less the GPU's idle power over the run's time. On CUDA, #35.2 too: the
    joules the collector's per-process split gave this process over the same runs (the
    placement evaluation's direct path: the kernels run here, no probes)."""
    import numpy as np

    from adaptyst_top.collectors.devices.nvml import NvmlCollector
    from adaptyst_top.placement.kernels import available_devices, make_inputs

    h = n.nvmlDeviceGetHandleByIndex(0)
    collector = NvmlCollector(n)
    gpu = collector.gpus[0]

    def own_j() -> float:
        """A process read now, and the energy counter with it (the collector's every
        5 s, made at once): this process's joules so far."""
        gpu.processes_at = gpu.counter_at = float("-inf")
        collector.read()
        return gpu.split.by_pid.get(os.getpid(), 0.0)

    def counter_j() -> float:
        return float(n.nvmlDeviceGetTotalEnergyConsumption(h)) / 1000.0

    c0, t0 = counter_j(), time.monotonic()
    time.sleep(2.0)
    idle_w = (counter_j() - c0) / (time.monotonic() - t0)
    devices = available_devices()
    rows, seen = [], set()
    for case in cases:
        key = (case["task"], case["n"], case.get("density"))
        if key in seen:
            continue
        seen.add(key)
        inp = make_inputs(case["task"], case["n"], case.get("density") or 0.01)
        row: dict[str, Any] = {"task": case["task"], "n": case["n"], "idle_w": round(idle_w, 1)}
        answers = {}
        for name, run in devices.items():
            for _ in range(3):
                answers[name] = run(inp)  # uploads, compiles, warms
            p0 = own_j() if name == "cuda" else 0.0
            runs, c0, t0 = 0, counter_j(), time.monotonic()
            while runs < 3 or time.monotonic() - t0 < 1.0:
                run(inp)
                runs += 1
            dt, de = time.monotonic() - t0, counter_j() - c0
            row[name] = {
                "ms": round(1e3 * dt / runs, 3),
                "gpu_j": round(de / runs, 5),
                "gpu_j_above_idle": round((de - idle_w * dt) / runs, 5),
                "runs": runs,
            }
            if name == "cuda":
                row[name]["process_j"] = round((own_j() - p0) / runs, 5)
        # Every device's answer against the CPU's (float32 sums differ in rounding).
        row["agree_with_cpu"] = {
            name: bool(np.allclose(np.asarray(a), np.asarray(answers["cpu"]), rtol=1e-3, atol=1e-3))
            for name, a in answers.items()
        }
        rows.append(row)
    collector.close()
    return rows


def placement(n: Any, out: Path, cases_file: Path, before: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        module_cmd(
            "experiments.placement.placement_eval",
            "--cases",
            str(cases_file),
            "--json",
            "--gpu-energy",
            "--warm",
            "--rows",
            str(out / "placement_rows.json"),
        ),
        capture_output=True,
        text=True,
        timeout=400,
        cwd=ROOT,
    )
    print(proc.stdout + proc.stderr, flush=True)
    totals = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
    cases = json.loads(cases_file.read_text())["cases"]
    old = before.get("placement") or {}
    cold = (totals or {}).get("vs_best_static_incl_learning")
    return {
        "eval_status": proc.returncode,
        "totals": totals,
        "before": old.get("totals"),  # the last H200 run's, from results/h200/
        "energy_per_run": energy_per_run(n, cases),
        "energy_per_run_before": old.get("energy_per_run"),
        "checks": {"cold_at_least_0.8_of_best_static": cold is not None and cold >= 0.8},
    }


def dask_cuda(out: Path) -> dict[str, Any]:
    """#35.4: bench/dask_eval.py with one worker offering `cuda`, one the CPU alone."""
    return bench_json(out / "dask_cuda.json", "dask_eval", "--accelerator", "cuda", "--json")


def bench_json(dest: Path, script: str, *args: str) -> dict[str, Any]:
    """A bench/ script's run (`python -m bench.SCRIPT`): its output to DEST, its last
    line's JSON returned."""
    proc = subprocess.run(
        module_cmd(f"bench.{script}", *args),
        capture_output=True,
        text=True,
        timeout=400,
        cwd=ROOT,
    )
    print(proc.stdout + proc.stderr, flush=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{script} exited {proc.returncode}")
    dest.write_text(proc.stdout)
    figures: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return figures


def user_view(scratch: Path) -> dict[str, Any]:
    """What an ordinary user's monitor reads while root's cupy load runs: NVML as that
    user (the device nodes' permissions decide), and the load only as another user's."""
    from adaptyst_top.collectors.devices.nvml import NvmlCollector

    info_path = scratch / "user_view_load.json"
    load = start_load(info_path, "--idle-before", "0", "--busy", "3", "--idle-after", "0")
    wait_info(load, info_path)
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # the user's side: never returns into this program
        try:
            os.close(r)
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            c = NvmlCollector()
            seen = {"state": c.state, "reason": c.reason, "gpus": len(c.gpus)}
            seen["readings"] = [x.to_json() for x in c.read()]
            os.write(w, json.dumps(seen).encode())
        except BaseException:  # SystemExit too: the child reports, then _exit below
            os.write(w, json.dumps({"failed": traceback.format_exc()}).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    os.waitpid(child, 0)
    load.wait(timeout=120)
    seen = json.loads(data)
    info = json.loads(info_path.read_text())
    gpus = [x for x in seen.get("readings", []) if x.get("kind") == "gpu"]
    extra = gpus[0]["extra"] if gpus else {}
    return {
        "load_pid": info["pid"],
        "as_user": seen,
        "checks": {
            "nvml_works_as_a_user": bool(gpus) and gpus[0].get("util") is not None,
            "the_load_is_not_listed": all(
                p["pid"] != info["pid"] for p in extra.get("processes", [])
            ),
            "the_load_is_counted_as_another_users": (extra.get("processes_of_others") or {}).get(
                "count", 0
            )
            >= 1,
        },
    }


def sweep_cost(out: Path) -> dict[str, Any]:
    return bench_json(out / "sweep.json", "bench_device_sweep", "--json", "--nvidia-smi")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--record-s", type=float, default=26.0)
    ap.add_argument("--cases", type=Path, default=PLACEMENT / "placement_cases_cuda.json")
    ap.add_argument("--parts", help="a comma-separated subset of: " + ",".join(PARTS))
    args = ap.parse_args()
    # The scripts it starts run from ROOT: every path they are given is absolute.
    args.out, args.cases = args.out.resolve(), args.cases.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    last = H200 / "gpu_check.json"  # read before --out may replace it
    args.before = json.loads(last.read_text()) if last.exists() else {}
    import pynvml

    with tempfile.TemporaryDirectory(prefix="gpu_check-") as scratch:
        return run_parts(args, pynvml, Path(scratch))


def run_parts(args: argparse.Namespace, pynvml: Any, scratch: Path) -> int:
    result: dict[str, Any] = {}
    parts: list[tuple[str, Callable[[], Any]]] = [
        # First, before this process opens NVML: the user's side is a fork of it, and
        # must open the device as that user, not inherit root's open driver.
        ("user_view", lambda: user_view(scratch)),
        ("nvml_init", pynvml.nvmlInit),
        ("nvml_raw", lambda: nvml_raw(pynvml)),
        (
            "telemetry_and_energy",
            lambda: telemetry_and_energy(pynvml, args.out, scratch, args.record_s),
        ),
        ("process_energy", lambda: process_energy(pynvml, scratch)),
        ("placement", lambda: placement(pynvml, args.out, args.cases, args.before)),
        ("dask_cuda", lambda: dask_cuda(args.out)),
        ("sweep", lambda: sweep_cost(args.out)),
        ("cuda_kernels", lambda: cuda_kernels(args.out, scratch)),
    ]
    for name, part in parts:
        if args.parts and name not in (*args.parts.split(","), "nvml_init"):
            continue
        t0 = time.monotonic()
        print(f"== {name}", flush=True)
        try:
            value = part()
        except Exception:  # the part's failure is a finding; the other parts still run
            value = {"failed": traceback.format_exc()}
            print(value["failed"], flush=True)
        if name == "nvml_raw":
            (args.out / "nvml_raw.json").write_text(json.dumps(value, indent=1))
        result[name] = value
        result.setdefault("seconds", {})[name] = round(time.monotonic() - t0, 1)
        (args.out / "gpu_check.json").write_text(json.dumps(result, indent=1))
    summary = {k: v for k, v in result.items() if k != "nvml_raw"}
    print(json.dumps(summary, indent=1), flush=True)
    failed = [name for name, value in result.items() if _has_failure(value)]
    if failed:  # every part ran; the run as a whole did not pass
        print(f"gpu_check: {len(failed)} part(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _has_failure(value: Any) -> bool:
    """A part's result holds a "failed" (its own, or one of its figures')."""
    if isinstance(value, dict):
        return "failed" in value or any(_has_failure(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_failure(v) for v in value)
    return False


if __name__ == "__main__":
    raise SystemExit(main())
