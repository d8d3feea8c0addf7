"""OpenCL platforms and devices, as plain data (pyopencl when importable).

The monitor lists them in a child process (`python -m` this module): an ICD such as
PoCL loads its own LLVM and clang, ~75 MiB resident that the monitor would carry for
its whole run only to learn a few names (results/2026-12-03-first-minutes-memory-cpu.md,
"Memory")."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

from adaptyst_top.collectors.devices.opencl_platforms import platforms_in_use

# cl_device_type bits (CL/cl.h)
CL_DEVICE_TYPE_CPU = 1 << 1
CL_DEVICE_TYPE_GPU = 1 << 2
CL_DEVICE_TYPE_ACCELERATOR = 1 << 3
CL_DEVICE_TYPE_CUSTOM = 1 << 4

FPGA_PLATFORM_HINTS = ("xilinx", "intel(r) fpga", "altera", "fpga")


@dataclass(frozen=True)
class OpenCLDevice:
    platform: str
    name: str
    type: str  # cpu | gpu | accelerator | custom | other
    vendor: str
    compute_units: int
    global_mem_bytes: int
    pci_bus_id: str | None = None

    @property
    def is_fpga(self) -> bool:
        plat = self.platform.lower()
        return self.type == "accelerator" or any(h in plat for h in FPGA_PLATFORM_HINTS)


def device_type_name(bits: int) -> str:
    for bit, name in (
        (CL_DEVICE_TYPE_GPU, "gpu"),
        (CL_DEVICE_TYPE_ACCELERATOR, "accelerator"),
        (CL_DEVICE_TYPE_CPU, "cpu"),
        (CL_DEVICE_TYPE_CUSTOM, "custom"),
    ):
        if bits & bit:
            return name
    return "other"


def _pci_bus_id(dev: Any) -> str | None:
    """Domain:bus:device.function from the vendor extensions that carry it."""
    try:
        exts = str(dev.extensions)
        if "cl_khr_pci_bus_info" in exts:
            info = dev.pci_bus_info_khr
            return (
                f"{info.pci_domain:04x}:{info.pci_bus:02x}:"
                f"{info.pci_device:02x}.{info.pci_function:x}"
            )
        if "cl_nv_device_attribute_query" in exts:
            return f"0000:{int(dev.pci_bus_id_nv):02x}:{int(dev.pci_slot_id_nv) >> 3:02x}.0"
        if "cl_amd_device_attribute_query" in exts:
            topo = dev.topology_amd
            return f"0000:{topo.bus:02x}:{topo.device:02x}.{topo.function:x}"
    except Exception:  # an extension that lies about itself must not hide the device
        return None
    return None


def list_opencl_devices(module: Any | None = None) -> list[OpenCLDevice]:
    """Every device of every platform. Raises RuntimeError with one line on failure."""
    cl: Any = module
    if cl is None:
        try:
            import pyopencl

            cl = pyopencl
        except ImportError as exc:
            raise RuntimeError(f"pyopencl not importable: {exc}") from exc
    try:
        platforms = cl.get_platforms()
    except Exception as exc:  # pyopencl.LogicError / RuntimeError: no ICD, no platform
        raise RuntimeError(f"no OpenCL platform: {str(exc).strip()}") from exc
    out: list[OpenCLDevice] = []
    for plat in platforms_in_use(platforms):
        try:
            devices = plat.get_devices()
        except Exception:  # a platform with no device of any type
            continue
        for dev in devices:
            out.append(
                OpenCLDevice(
                    platform=str(plat.name).strip(),
                    name=str(dev.name).strip(),
                    type=device_type_name(int(dev.type)),
                    vendor=str(dev.vendor).strip(),
                    compute_units=int(dev.max_compute_units),
                    global_mem_bytes=int(dev.global_mem_size),
                    pci_bus_id=_pci_bus_id(dev),
                )
            )
    return out


LIST_TIMEOUT_S = 30.0  # PoCL's first run compiles its kernel library (seconds, once)
_PR_SET_PDEATHSIG = 1
MARK = "adaptyst-top-opencl: "  # the answer's line, among whatever an ICD prints


def list_opencl_devices_apart(timeout: float = LIST_TIMEOUT_S) -> list[OpenCLDevice]:
    """list_opencl_devices() in a child process; RuntimeError with one line on failure
    (the child's error, a timeout, or an answer that is not a device list). The child
    is isolated (`-I`: no current folder, user site or PYTHON* variables on its path)
    and starts in `/`: run as root from a folder others write, it must not import their
    `json.py`."""
    try:
        with subprocess.Popen(
            [sys.executable, "-I", "-m", __name__, str(os.getpid())],
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # what an ICD starts goes with it on a timeout
        ) as child:
            try:
                out, err = child.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.communicate()
                raise RuntimeError(f"listing OpenCL devices took over {timeout:.0f} s") from None
    except OSError as exc:
        raise RuntimeError(f"listing OpenCL devices failed: {exc.strerror}") from None
    # An ICD may print lines of its own, before the answer or after it (at exit).
    answers = [ln for ln in out.decode(errors="replace").splitlines() if ln.startswith(MARK)]
    try:
        answer = json.loads(answers[-1][len(MARK) :])
        if "error" in answer:
            raise RuntimeError(str(answer["error"]).splitlines()[0])
        names = {f.name for f in fields(OpenCLDevice)}
        return [
            OpenCLDevice(**{k: v for k, v in d.items() if k in names}) for d in answer["devices"]
        ]
    except (ValueError, IndexError, KeyError, TypeError, AttributeError):
        said = (err.decode(errors="replace").strip().splitlines() or ["no answer"])[-1]
        raise RuntimeError(f"listing OpenCL devices failed: {said}") from None


class SharedListing:
    """LISTER's answer shared by every caller in this process for TTL_S (a failure for
    FAILED_TTL_S); callers that come while it runs wait for that one run. Each listing
    is a child of ~1 s of CPU (PoCL's start), and every sweep of a process lists the
    same node: the agent opened each user's session with its own, and one user's 14
    sessions at once ran 14 on two cores while another user waited
    (bench/bench_agent_privsep.py)."""

    def __init__(
        self,
        lister: Callable[[], list[OpenCLDevice]],
        ttl_s: float = 600.0,
        failed_ttl_s: float = 60.0,
    ) -> None:
        self._lister = lister
        self._ttl = (ttl_s, failed_ttl_s)
        self._lock = threading.Lock()
        self._kept: tuple[float, list[OpenCLDevice] | RuntimeError] | None = None

    def __call__(self) -> list[OpenCLDevice]:
        with self._lock:  # one run at a time: the others wait for its answer
            now = time.monotonic()
            if self._kept is not None:
                at, got = self._kept
                if now - at < self._ttl[isinstance(got, RuntimeError)]:
                    if isinstance(got, RuntimeError):
                        raise got
                    return list(got)
            try:
                devices = self._lister()
            except RuntimeError as exc:
                self._kept = (time.monotonic(), exc)
                raise
            self._kept = (time.monotonic(), devices)
            return list(devices)


def _die_with(parent: int) -> None:
    """SIGKILL when the parent dies (a killed monitor leaves no lister behind). The
    thread that started this one waits for it, so the signal cannot come early."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the signal was set
        os._exit(1)


def _main() -> None:
    if len(sys.argv) > 1 and sys.argv[1].isdigit():
        _die_with(int(sys.argv[1]))
    try:
        answer: dict[str, Any] = {"devices": [asdict(d) for d in list_opencl_devices()]}
    except RuntimeError as exc:
        answer = {"error": str(exc)}
    sys.stdout.flush()
    print(MARK + json.dumps(answer), flush=True)


shared_listing = SharedListing(list_opencl_devices_apart)


if __name__ == "__main__":
    _main()
