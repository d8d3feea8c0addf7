"""`adaptyst-top doctor`: one entry per capability, each with status, detail and fix.

Roots (`sysfs`) and modules (`nvml`) are injectable so that tests can stand in for
hardware this machine lacks, with the real names, units and error types.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from adaptyst_top.collectors.devices import sources as registry
from adaptyst_top.collectors.devices.amd_gpu import check_amd_gpu as check_amd_gpu
from adaptyst_top.collectors.devices.cpu import check_cpu as check_cpu
from adaptyst_top.collectors.devices.fpga import check_fpga as check_fpga
from adaptyst_top.collectors.devices.nvml import check_nvml as check_nvml
from adaptyst_top.collectors.devices.opencl import check_opencl as check_opencl
from adaptyst_top.collectors.devices.rapl import check_rapl as check_rapl
from adaptyst_top.collectors.probes.bpf.ebpf_env import FIX_ROOT, check_ebpf
from adaptyst_top.collectors.probes.elf import debuginfod
from adaptyst_top.collectors.probes.elf.debug_files import DEBUG_ROOT
from adaptyst_top.system.capability import Capability


def run_doctor(run_smoke: bool = True) -> list[Capability]:
    """The CPU first (the monitor needs it), eBPF, every device source's checks in
    registry.SOURCES' order, then the names and the Pythons this node offers."""
    source_checks = [c for s in registry.SOURCES for c in s.checks]
    checks: list[tuple[str, Callable[[], Capability]]] = [
        *source_checks[:1],
        ("ebpf", lambda: check_ebpf(run_smoke=run_smoke)),
        *source_checks[1:],
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
