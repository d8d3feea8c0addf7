"""`adaptyst-top doctor`: one entry per capability, each with status, detail and fix.

Roots (`sysfs`) and modules (`nvml`) are injectable so that tests can stand in for
hardware this machine lacks, with the real names, units and error types.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adaptyst_top.collectors.devices.opencl_inventory import list_opencl_devices
from adaptyst_top.collectors.probes import debuginfod
from adaptyst_top.collectors.probes.debug_files import DEBUG_ROOT
from adaptyst_top.collectors.probes.ebpf_env import FIX_ROOT, check_ebpf
from adaptyst_top.system.capability import Capability, Status

AMD_PCI_VENDOR = "0x1002"


def check_cpu() -> Capability:
    try:
        import psutil
    except ImportError:
        return Capability("cpu", "missing", "psutil not importable", "`make setup`")
    return Capability(
        "cpu",
        "ok",
        f"psutil {psutil.__version__}: {psutil.cpu_count()} logical CPUs, "
        f"{psutil.virtual_memory().total / 2**30:.1f} GiB",
    )


def _nvml_error_name(nvml: Any, exc: Exception) -> str:
    code = getattr(exc, "value", None)
    for name in ("LIBRARY_NOT_FOUND", "DRIVER_NOT_LOADED", "NO_PERMISSION", "GPU_IS_LOST"):
        if code is not None and code == getattr(nvml, f"NVML_ERROR_{name}", object()):
            return name
    return "OTHER"


def check_nvml(module: Any | None = None) -> Capability:
    nvml: Any = module
    if nvml is None:
        try:
            import pynvml

            nvml = pynvml
        except ImportError:
            return Capability(
                "nvml", "missing", "nvidia-ml-py not installed", "pip install nvidia-ml-py"
            )
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        kind = _nvml_error_name(nvml, exc)
        if kind == "LIBRARY_NOT_FOUND":
            return Capability(
                "nvml",
                "missing",
                "libnvidia-ml.so.1 not found (no NVIDIA driver)",
                "install the NVIDIA driver, or ignore on a node without NVIDIA GPUs",
            )
        if kind == "DRIVER_NOT_LOADED":
            return Capability(
                "nvml", "missing", "NVIDIA driver not loaded", "modprobe nvidia (or reboot)"
            )
        if kind == "NO_PERMISSION":
            return Capability(
                "nvml", "denied", "no permission to open /dev/nvidia*", "add the user to `video`"
            )
        return Capability("nvml", "missing", f"nvmlInit failed: {exc}", "check `nvidia-smi`")
    try:
        driver = nvml.nvmlSystemGetDriverVersion()
        count = nvml.nvmlDeviceGetCount()
        names = []
        for i in range(count):
            name = nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(i))
            names.append(name.decode() if isinstance(name, bytes) else str(name))
    except nvml.NVMLError as exc:
        return Capability("nvml", "degraded", f"driver answers but: {exc}", "check `nvidia-smi`")
    finally:
        nvml.nvmlShutdown()
    if isinstance(driver, bytes):
        driver = driver.decode()
    if count == 0:
        return Capability("nvml", "missing", f"driver {driver}, no GPU", "")
    return Capability("nvml", "ok", f"driver {driver}, {count} GPU(s): {', '.join(names)}")


def check_rapl(sysfs: Path = Path("/sys")) -> Capability:
    base = sysfs / "class/powercap"
    zones = sorted(p for p in base.glob("*-rapl:*") if (p / "energy_uj").exists())
    if not zones:
        return Capability(
            "rapl",
            "missing",
            "no powercap RAPL zones (virtual machine or no driver)",
            "modprobe intel_rapl_common (bare metal Intel or AMD Zen only)",
        )
    readable, denied = [], []
    for z in zones:
        try:
            int((z / "energy_uj").read_text())
            name = (z / "name").read_text().strip() if (z / "name").exists() else z.name
            readable.append(name)
        except PermissionError:
            denied.append(z.name)
        except (OSError, ValueError):
            denied.append(z.name)
    if not readable:
        return Capability(
            "rapl",
            "denied",
            f"{len(denied)} zone(s), energy_uj readable by root only (CVE-2020-8694)",
            "run as root",
        )
    return Capability("rapl", "ok", f"{len(readable)} zone(s): {', '.join(readable)}")


def check_amd_gpu(sysfs: Path = Path("/sys")) -> Capability:
    cards = []
    for card in sorted((sysfs / "class/drm").glob("card[0-9]*")):
        try:
            vendor = (card / "device/vendor").read_text().strip()
        except OSError:
            continue
        if vendor == AMD_PCI_VENDOR and "-" not in card.name:
            sensors = [
                f.name
                for f in (card / "device").glob("hwmon/hwmon*/*")
                if f.name in ("power1_average", "power1_input", "energy1_input")
            ]
            cards.append(f"{card.name}({'+'.join(sorted(sensors)) or 'no power sensor'})")
    has_amdsmi = importlib.util.find_spec("amdsmi") is not None
    if not cards:
        return Capability(
            "amd-gpu",
            "missing",
            "no AMD GPU (amdgpu driver) found" + ("; amdsmi importable" if has_amdsmi else ""),
            "ignore on a node without AMD GPUs",
        )
    status: Status = "ok" if has_amdsmi or any("power" in c for c in cards) else "degraded"
    return Capability(
        "amd-gpu",
        status,
        f"{', '.join(cards)}; amdsmi {'importable' if has_amdsmi else 'absent'}",
        "" if status == "ok" else "pip install amdsmi (ROCm) for power and utilisation",
    )


def check_opencl(lister: Callable[[], list[Any]] = list_opencl_devices) -> Capability:
    try:
        devices = lister()
    except RuntimeError as exc:
        return Capability(
            "opencl", "missing", str(exc), "pip install pocl-binary-distribution (or a vendor ICD)"
        )
    if not devices:
        return Capability("opencl", "missing", "platforms but no devices", "install a vendor ICD")
    desc = ", ".join(f"{d.type}:{d.name} [{d.platform}]" for d in devices)
    return Capability("opencl", "ok", f"{len(devices)} device(s): {desc}")


def check_fpga(
    sysfs: Path = Path("/sys"),
    opt: Path = Path("/opt"),
    lister: Callable[[], list[Any]] = list_opencl_devices,
) -> Capability:
    found: list[str] = []
    with contextlib.suppress(RuntimeError):  # no OpenCL at all is simply no FPGA through it
        found += [f"OpenCL {d.name} [{d.platform}]" for d in lister() if d.is_fpga]
    if importlib.util.find_spec("pyxrt") is not None:
        found.append("XRT (pyxrt)")
    elif (opt / "xilinx/xrt").is_dir():
        found.append(f"XRT at {opt / 'xilinx/xrt'} (pyxrt not importable)")
    xocl = [p.name for p in (sysfs / "bus/pci/drivers/xocl").glob("0000:*")]
    found += [f"Xilinx card {b}" for b in xocl]
    dfl = [p.name for p in (sysfs / "bus/dfl/devices").glob("dfl*")]
    if dfl:
        found.append(f"Intel DFL: {len(dfl)} feature device(s)")
    if not found:
        return Capability(
            "fpga",
            "missing",
            "no FPGA (no OpenCL accelerator platform, XRT or Intel DFL device)",
            "install XRT or the Intel FPGA runtime on a node with an FPGA card",
        )
    return Capability("fpga", "ok", "; ".join(found))


def run_doctor(run_smoke: bool = True) -> list[Capability]:
    checks: list[tuple[str, Callable[[], Capability]]] = [
        ("cpu", check_cpu),
        ("ebpf", lambda: check_ebpf(run_smoke=run_smoke)),
        ("nvml", check_nvml),
        ("rapl", check_rapl),
        ("amd-gpu", check_amd_gpu),
        ("opencl", check_opencl),
        ("fpga", check_fpga),
        ("debug-names", check_debug_names),
        ("python", check_python),
    ]
    return [_guarded(name, check) for name, check in checks]


def check_debug_names(debug_root: Path = Path(DEBUG_ROOT)) -> Capability:
    """Where a stripped library's names can come from here: the distribution's debug
    files (by build ID), a debuginfod server; without either, its unwind table's
    function starts (`lib+0xADDRESS`, still probed exactly)."""
    ids = debug_root / ".build-id"
    files = sum(1 for _ in ids.glob("*/*.debug")) if ids.is_dir() else 0
    servers = debuginfod.urls()
    found = []
    if files:
        found.append(f"{files} debug file(s) in {ids}")
    if servers:
        found.append(f"debuginfod: {' '.join(servers)} (cache {debuginfod.cache_root()})")
    if not found:
        return Capability(
            "debug-names",
            "degraded",
            "no debug files, no DEBUGINFOD_URLS: stripped code is named by address",
            "install a library's -dbgsym/-dbg package, or set DEBUGINFOD_URLS",
        )
    return Capability("debug-names", "ok", "; ".join(found))


def check_python(places: tuple[str, ...] | None = None) -> Capability:
    """The CPythons on this node's PATH (and the usual folders) whose frames the profile
    walks and whose functions `python:` probes time: the versions offsets.py knows."""
    import glob
    import os
    import re

    from adaptyst_top.collectors.profile.python.offsets import OFFSETS

    folders = places or (*os.environ.get("PATH", "").split(":"), "/usr/bin", "/usr/local/bin")
    seen: dict[str, str] = {}
    for folder in dict.fromkeys(f for f in folders if f):
        for exe in sorted(glob.glob(f"{folder}/python3.*")):
            m = re.fullmatch(r"python3\.(\d+)", os.path.basename(exe))
            if m and os.access(exe, os.X_OK):
                seen.setdefault(os.path.realpath(exe), f"3.{m.group(1)}")
    known = {p: v for p, v in seen.items() if (3, int(v[2:])) in OFFSETS}
    if not known:
        versions = ", ".join(f"{a}.{b}" for a, b in sorted(OFFSETS))
        return Capability(
            "python", "missing", f"no CPython {versions} found on PATH", "install python3"
        )
    shown = ", ".join(f"{v} ({p})" for p, v in sorted(known.items(), key=lambda i: i[1]))
    return Capability("python", "ok", f"Python frames and python: probes for {shown}")


def _guarded(name: str, check: Callable[[], Capability]) -> Capability:
    """The command meant to diagnose never crashes: a check that fails unexpectedly
    (a file only root may read, say) is reported as what it is."""
    try:
        return check()
    except PermissionError as exc:
        return Capability(name, "denied", f"{exc.filename or exc}: permission denied", FIX_ROOT)
    except Exception as exc:  # the report goes on; the reason is shown
        return Capability(name, "degraded", f"the check failed: {type(exc).__name__}: {exc}")


def can_run(caps: list[Capability]) -> bool:
    """The monitor needs only the CPU collector; everything else is optional."""
    return all(c.usable for c in caps if c.name == "cpu")
