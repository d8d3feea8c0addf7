"""What eBPF probing needs on this machine, checked one piece at a time.

Each check returns a :class:`Capability` so that the doctor, the probe engine and
the TUI all state the same reason and the same fix.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from adaptyst_top.collectors.probes.engine.uprobe_multi import release_has_multi
from adaptyst_top.system.capability import Capability, worst

CAP_SYS_ADMIN = 21
CAP_PERFMON = 38
CAP_BPF = 39

# bpf(2) syscall numbers; the generic table (aarch64, riscv) uses 280.
_BPF_SYSCALL = {"x86_64": 321, "i686": 357, "aarch64": 280, "riscv64": 280, "ppc64le": 361}
_BPF_MAP_CREATE = 0
_BPF_MAP_TYPE_ARRAY = 2

FIX_ROOT = "run as root (sudo adaptyst-top ...) or grant CAP_BPF and CAP_PERFMON"
FIX_SETUP = "run `make setup` as root"


def effective_caps(status_file: Path = Path("/proc/self/status")) -> int:
    try:
        for line in status_file.read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def check_privileges(euid: int | None = None, caps: int | None = None) -> Capability:
    euid = os.geteuid() if euid is None else euid
    caps = effective_caps() if caps is None else caps

    def has(bit: int) -> bool:
        return bool(caps >> bit & 1)

    if euid == 0:
        return Capability("privileges", "ok", "root")
    if (has(CAP_BPF) and has(CAP_PERFMON)) or has(CAP_SYS_ADMIN):
        return Capability("privileges", "ok", "CAP_BPF+CAP_PERFMON")
    return Capability("privileges", "denied", "not root and no CAP_BPF+CAP_PERFMON", FIX_ROOT)


def check_bpf_syscall() -> Capability:
    """Create (and close) a one-entry array map: the smallest real use of bpf(2)."""
    nr = _BPF_SYSCALL.get(platform.machine())
    if nr is None:
        return Capability(
            "bpf-syscall", "degraded", f"unknown syscall number on {platform.machine()}"
        )
    attr = (ctypes.c_uint32 * 32)(_BPF_MAP_TYPE_ARRAY, 4, 4, 1)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(nr, _BPF_MAP_CREATE, ctypes.byref(attr), ctypes.sizeof(attr))
    if fd >= 0:
        os.close(fd)
        return Capability("bpf-syscall", "ok", "bpf() works")
    err = ctypes.get_errno()
    if err == errno.ENOSYS:
        return Capability(
            "bpf-syscall",
            "missing",
            "kernel without bpf()",
            "use a kernel with CONFIG_BPF_SYSCALL=y",
        )
    if err in (errno.EPERM, errno.EACCES):
        return Capability("bpf-syscall", "denied", f"bpf(): {os.strerror(err)}", FIX_ROOT)
    return Capability("bpf-syscall", "degraded", f"bpf(): {os.strerror(err)}")


def check_uprobes(sysfs: Path = Path("/sys")) -> Capability:
    if (sysfs / "bus/event_source/devices/uprobe/type").exists():
        return Capability("uprobes", "ok", "uprobe PMU present")
    return Capability(
        "uprobes", "missing", "no uprobe PMU", "use a kernel with CONFIG_UPROBE_EVENTS=y"
    )


def tracefs_dir(sysfs: Path = Path("/sys")) -> Path | None:
    for d in (sysfs / "kernel/tracing", sysfs / "kernel/debug/tracing"):
        try:
            if (d / "uprobe_events").exists():
                return d
        except PermissionError:  # root-only (mode 0700): not ours to list
            continue
    return None


def check_tracefs(sysfs: Path = Path("/sys")) -> Capability:
    d = tracefs_dir(sysfs)
    if d is not None:
        return Capability("tracefs", "ok", f"tracefs at {d}")
    if not os.access(sysfs / "kernel/tracing", os.X_OK) and (sysfs / "kernel/tracing").is_dir():
        return Capability("tracefs", "denied", "tracefs is readable by root only", FIX_ROOT)
    return Capability(
        "tracefs",
        "degraded",
        "tracefs not mounted (probes attach through perf events; leftovers cannot be listed)",
        "mount -t tracefs nodev /sys/kernel/tracing",
    )


# The programs compiled with the package (setup.py's BuildWithBpf), under adaptyst_top/:
# every `*.bpf.c` of the sources (tests/unit/collectors/test_precompiled_list.py).
PRECOMPILED = (
    "collectors/probes/kinds/uprobe.bpf.o",
    "collectors/probes/kinds/usdt.bpf.o",
    "collectors/probes/bpf/follow.bpf.o",
    "collectors/profile/sampler.bpf.o",
)
PACKAGE = Path(__file__).resolve().parents[3]
VMLINUX_BTF = Path("/sys/kernel/btf/vmlinux")


def check_libbpf(package: Path = PACKAGE) -> Capability:
    """libbpf.so.1 and the programs built with the package: all a node needs to load
    them (no compiler, no kernel headers)."""
    from adaptyst_top.collectors.probes.bpf import libbpf

    if (why := libbpf.available()) is not None:
        return Capability("libbpf", "missing", why, "apt install libbpf1 (dnf install libbpf)")
    absent = [name for name in PRECOMPILED if not (package / name).is_file()]
    if absent:
        return Capability(
            "libbpf",
            "missing",
            f"the package's BPF programs were not built ({Path(absent[0]).name})",
            "reinstall it where clang and libbpf-dev are (`make setup`)",
        )
    return Capability("libbpf", "ok", f"libbpf.so.1, {len(PRECOMPILED)} precompiled programs")


def check_btf(path: Path = VMLINUX_BTF) -> Capability:
    """The kernel's description of itself: what the programs are relocated against."""
    if path.is_file() and os.access(path, os.R_OK):
        return Capability("btf", "ok", f"kernel BTF ({path})")
    return Capability(
        "btf",
        "degraded",
        f"no kernel BTF at {path}: probes count and time, but no profile, no followed "
        "children, no on-CPU time, and no agent for other users",
        "a kernel built with CONFIG_DEBUG_INFO_BTF=y (RHEL 8.2+, Debian 11+, Ubuntu 20.10+)",
    )


def smoke_test(timeout: float = 60.0) -> Capability:
    """Load, attach and fire one real uprobe, in a child so that a crash stays there."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "adaptyst_top.collectors.probes.bpf.ebpf_smoke"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return Capability("smoke-test", "missing", f"one-probe test timed out after {timeout:.0f}s")
    lines = proc.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        result = {}
    if proc.returncode == 0 and result.get("ok"):
        return Capability(
            "smoke-test",
            "ok",
            f"uprobe on libc getpid counted {result['hits']} of {result['calls']}",
        )
    err = result.get("error") or (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return Capability("smoke-test", "missing", f"one-probe test failed: {err}", FIX_SETUP)


def check_uprobe_multi(release: str | None = None) -> Capability:
    """Multi-uprobe links (kernel >= 6.6): a wide glob attaches in one call per process."""
    release = release or os.uname().release
    if release_has_multi(release):
        return Capability("uprobe-multi", "ok", f"multi-uprobe links (kernel {release})")
    return Capability(
        "uprobe-multi",
        "degraded",
        f"kernel {release} has no multi-uprobe links (6.6+): one uprobe per function, "
        "so wide globs attach and detach slowly",
        "a kernel 6.6 or later",
    )


def check_ebpf(run_smoke: bool = True) -> Capability:
    parts = [
        check_privileges(),
        check_bpf_syscall(),
        check_uprobes(),
        check_uprobe_multi(),
        check_tracefs(),
        check_libbpf(),
        check_btf(),
    ]
    blocking = [p for p in parts if p.status in ("missing", "denied")]
    if run_smoke and not blocking:
        parts.append(smoke_test())
    limit = worst(parts)
    if limit.status == "ok":
        detail = f"root or caps, libbpf, BTF; {parts[-1].detail}"
        return Capability("ebpf", "ok", detail, parts=parts)
    # Say every part that is not ok, so one line tells the whole story.
    detail = "; ".join(f"{p.name}: {p.detail}" for p in parts if p.status != "ok")
    if limit.status == "degraded" and any(p.name == "smoke-test" for p in parts):
        detail += f"; {parts[-1].detail}"
    return Capability("ebpf", limit.status, detail, limit.fix, parts=parts)
