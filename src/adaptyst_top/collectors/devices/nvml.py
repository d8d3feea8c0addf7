"""NVIDIA GPUs through NVML (nvidia-ml-py, module `pynvml`).

Every NVML error becomes a state: library or driver missing (no devices, the reason
said once), a metric not supported (never asked again for that device), no
permission (said), GPU lost (that device is no longer polled; the others go on).
Energy comes from nvmlDeviceGetTotalEnergyConsumption (mJ, Volta and newer) as
counter deltas, else from integrated power.

Measured on an H200 (driver 580, experiments/gpu/gpu_check.py): every call answers in 2-16 us
but the energy counter, ~3.2 ms of CPU, and the MIG mode, ~0.15 ms. The counter (like
instant power) moves every 100 ms, so it is read every COUNTER_EVERY_S, with power
integrated in between (collectors/energy/account.py), and the MIG mode with the process list.
NVML lists every user's processes on a GPU to anyone: a user of the monitor is shown
their own, and the others as a count and their memory together.

Memory "used" is NVML's v2 figure, which leaves out the driver's reservation (615 MiB
of an idle H200 that v1 counts as used), as nvidia-smi does.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from adaptyst_top.collectors.devices.source import CollectorSource, SweepContext
from adaptyst_top.collectors.energy.account import EnergyAccount
from adaptyst_top.collectors.energy.gpu_processes import split_for
from adaptyst_top.collectors.energy.gpu_split import (
    GONE,
    PROCESS_EVERY_S,
    ProcessEnergySplit,
)
from adaptyst_top.collectors.energy.gpu_split import METHOD as SPLIT_METHOD
from adaptyst_top.snapshot import DeviceReading, SourceState, SourceStatus
from adaptyst_top.system.capability import Capability
from adaptyst_top.system.process_names import process_name

T = TypeVar("T")
COUNTER_EVERY_S = 5.0  # the energy counter costs ~3 ms a read: power fills in between


class _Lost(Exception):
    pass


@dataclass
class Gpu:
    index: int
    handle: Any
    name: str
    uuid: str = ""
    pci_bus_id: str = ""
    unsupported: set[str] = field(default_factory=set)
    denied: set[str] = field(default_factory=set)
    lost: bool = False
    energy: EnergyAccount = field(default_factory=lambda: EnergyAccount("nvml"))
    processes: list[dict[str, Any]] = field(default_factory=list)
    processes_at: float = -1e9
    counter_at: float = -1e9
    mig: list[dict[str, Any]] | None = None
    others: dict[str, int] | None = None  # other users' processes, in total
    last_util_ts: int = 0
    split: ProcessEnergySplit = field(default_factory=ProcessEnergySplit)
    gone_j: float = 0.0


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class NvmlCollector:
    def __init__(self, nvml: Any | None = None) -> None:
        self.nvml: Any = nvml
        self.gpus: list[Gpu] = []
        self.euid = os.geteuid()
        self.state: SourceStatus = "ok"
        self.reason = ""
        if self.nvml is None:
            try:
                import pynvml

                self.nvml = pynvml
            except ImportError:
                self.state, self.reason = "missing", "nvidia-ml-py not installed"
                return
        n = self.nvml
        # Errors that will not change on this driver: the metric is never asked again.
        self._unsupported: tuple[type[Exception], ...] = tuple(
            getattr(n, name)
            for name in (
                "NVMLError_NotSupported",
                "NVMLError_FunctionNotFound",
                "NVMLError_ArgumentVersionMismatch",
            )
            if hasattr(n, name)
        )
        try:
            n.nvmlInit()
        except n.NVMLError as exc:
            self.state = "denied" if isinstance(exc, n.NVMLError_NoPermission) else "missing"
            self.reason = f"NVML unavailable: {exc}"
            return
        try:
            for i in range(n.nvmlDeviceGetCount()):
                h = n.nvmlDeviceGetHandleByIndex(i)
                gpu = Gpu(i, h, _text(n.nvmlDeviceGetName(h)))
                try:
                    gpu.uuid = _text(n.nvmlDeviceGetUUID(h))
                    gpu.pci_bus_id = _text(n.nvmlDeviceGetPciInfo(h).busId).lower()
                except n.NVMLError:
                    pass
                self.gpus.append(gpu)
        except n.NVMLError as exc:
            self.state, self.reason = "degraded", f"listing GPUs failed: {exc}"

    # ------------------------------------------------------------------------------

    def _ask(self, gpu: Gpu, metric: str, call: Callable[[], T]) -> T | None:
        """One NVML call; its error becomes the device's state, not an exception."""
        if metric in gpu.unsupported or metric in gpu.denied:
            return None
        n = self.nvml
        try:
            return call()
        except self._unsupported:
            gpu.unsupported.add(metric)
        except n.NVMLError_NoPermission:
            gpu.denied.add(metric)
        except n.NVMLError_GpuIsLost:
            gpu.lost = True
            raise _Lost() from None
        except n.NVMLError:
            pass  # transient (e.g. NVML_ERROR_UNKNOWN): ask again next time
        return None

    def read(self, now: float | None = None) -> list[DeviceReading]:
        now = time.monotonic() if now is None else now
        out = []
        for gpu in self.gpus:
            r = DeviceReading(id=f"gpu:{gpu.index}", kind="gpu", name=gpu.name)
            r.extra = {"uuid": gpu.uuid, "pci_bus_id": gpu.pci_bus_id}
            if gpu.lost:
                r.note = "GPU lost (NVML_ERROR_GPU_IS_LOST): no longer polled"
                out.append(r)
                continue
            try:
                self._fill(gpu, r, now)
            except _Lost:
                r = DeviceReading(id=f"gpu:{gpu.index}", kind="gpu", name=gpu.name)
                r.note = "GPU lost (NVML_ERROR_GPU_IS_LOST): no longer polled"
            out.append(r)
        return out

    def _fill(self, gpu: Gpu, r: DeviceReading, now: float) -> None:
        n, h = self.nvml, gpu.handle
        rates = self._ask(gpu, "util", lambda: n.nvmlDeviceGetUtilizationRates(h))
        if rates is not None:
            r.util = rates.gpu / 100.0
            r.extra["mem_util"] = rates.memory / 100.0
        self._memory(gpu, r)
        power_w = self.power_w(gpu)
        counter_mj = None
        if now - gpu.counter_at >= COUNTER_EVERY_S or power_w is None:
            counter_mj = self._ask(gpu, "energy", lambda: n.nvmlDeviceGetTotalEnergyConsumption(h))
            gpu.counter_at = now
        e = gpu.energy.update(
            now,
            counter_j=None if counter_mj is None else counter_mj / 1000.0,
            power_w=power_w,
        )
        r.set_energy(e, power_w)
        if e.source is None:
            r.note = "no energy counter or power reading on this GPU"
        r.temp_c = self._ask(
            gpu, "temperature", lambda: float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU))
        )
        clock = self._ask(gpu, "sm_clock", lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM))
        if clock is not None:
            r.extra["sm_clock_mhz"] = int(clock)
        if now - gpu.processes_at >= PROCESS_EVERY_S:
            gpu.processes_at = now
            gpu.processes = self._processes(gpu, e.energy_j)
            gpu.mig = self._mig(gpu)
        if "process_util" in gpu.unsupported:
            r.extra["process_energy"] = "none: no per-process utilisation here (MIG)"
        elif gpu.split.measured_j:
            r.extra["process_energy"] = SPLIT_METHOD
            r.extra["idle_j"] = round(gpu.split.idle_j, 6)
            r.extra["exited_j"] = round(gpu.gone_j, 6)  # processes gone before a read
        if gpu.mig is not None:
            r.extra["mig"] = gpu.mig
        r.extra["processes"] = gpu.processes
        if gpu.others is not None:
            r.extra["processes_of_others"] = gpu.others
        if gpu.denied:
            r.note = (
                (r.note + "; " if r.note else "")
                + "no permission for: "
                + ", ".join(sorted(gpu.denied))
            )

    def _memory(self, gpu: Gpu, r: DeviceReading) -> None:
        """Used and total bytes; the driver's reservation apart where NVML has v2."""
        n, h = self.nvml, gpu.handle
        mem = None
        if hasattr(n, "nvmlMemory_v2"):  # nvidia-ml-py 12 and newer
            mem = self._ask(gpu, "memory_v2", lambda: n.nvmlDeviceGetMemoryInfo(h, n.nvmlMemory_v2))
        if mem is not None:
            r.extra["mem_reserved_bytes"] = int(mem.reserved)
        else:  # a driver before v2 (or one that refuses it): v1 counts the reservation
            mem = self._ask(gpu, "memory", lambda: n.nvmlDeviceGetMemoryInfo(h))
        if mem is not None:
            r.mem_used_bytes, r.mem_total_bytes = int(mem.used), int(mem.total)

    def power_w(self, gpu: Gpu) -> float | None:
        """The GPU's power now (W): instant where the driver has it."""
        n, h = self.nvml, gpu.handle

        def instant() -> float | None:
            # Field values give instantaneous power where the driver has it (Hopper:
            # nvmlDeviceGetPowerUsage is a 1 s average).
            v = n.nvmlDeviceGetFieldValues(h, [n.NVML_FI_DEV_POWER_INSTANT])[0]
            if v.nvmlReturn != n.NVML_SUCCESS:
                raise n.NVMLError(v.nvmlReturn)
            return float(v.value.uiVal) / 1000.0

        w = self._ask(gpu, "power_instant", instant)
        if w is not None:
            return w
        mw = self._ask(gpu, "power", lambda: n.nvmlDeviceGetPowerUsage(h))
        return None if mw is None else mw / 1000.0

    def _mig(self, gpu: Gpu) -> list[dict[str, Any]] | None:
        n, h = self.nvml, gpu.handle
        mode = self._ask(gpu, "mig", lambda: n.nvmlDeviceGetMigMode(h))
        if mode is None or mode[0] != n.NVML_DEVICE_MIG_ENABLE:
            return None
        instances = []
        count = self._ask(gpu, "mig", lambda: n.nvmlDeviceGetMaxMigDeviceCount(h)) or 0
        for i in range(count):
            try:
                mh = n.nvmlDeviceGetMigDeviceHandleByIndex(h, i)
            except n.NVMLError_NotFound:
                continue  # an empty slot
            except n.NVMLError:
                continue
            entry: dict[str, Any] = {"index": i}
            try:
                entry["uuid"] = _text(n.nvmlDeviceGetUUID(mh))
                mem = n.nvmlDeviceGetMemoryInfo(mh)
                entry["mem_used_bytes"], entry["mem_total_bytes"] = int(mem.used), int(mem.total)
            except n.NVMLError:
                pass
            instances.append(entry)
        return instances

    def _processes(self, gpu: Gpu, energy_j: float | None) -> list[dict[str, Any]]:
        n, h = self.nvml, gpu.handle
        procs = self._ask(gpu, "processes", lambda: n.nvmlDeviceGetComputeRunningProcesses(h)) or []
        by_pid: dict[int, dict[str, Any]] = {}
        for p in procs:
            mem = getattr(p, "usedGpuMemory", None)
            by_pid[int(p.pid)] = {"pid": int(p.pid), "mem_bytes": None if mem is None else int(mem)}
        samples = self._ask(
            gpu, "process_util", lambda: n.nvmlDeviceGetProcessUtilization(h, gpu.last_util_ts)
        )
        running = set(by_pid)
        util: dict[int, float] = {}  # each process's samples since the last read, summed
        entries: dict[int, int] = {}
        times: set[int] = set()  # the window's sample times, every process's
        for s in samples or []:
            by_pid.setdefault(int(s.pid), {"pid": int(s.pid), "mem_bytes": None})
            util[int(s.pid)] = util.get(int(s.pid), 0.0) + s.smUtil / 100.0
            entries[int(s.pid)] = entries.get(int(s.pid), 0) + 1
            times.add(int(s.timeStamp))
            gpu.last_util_ts = max(gpu.last_util_ts, int(s.timeStamp))
        # NVML documents one entry a process, its utilisation since `last` stamped with
        # its own time (an H200 answers so): each is the window's figure. A driver that
        # returns its sample buffer gives several: their mean over every sample time,
        # as a burst is not the whole window.
        per_window = len(times) if any(c > 1 for c in entries.values()) else 1
        for pid, total in util.items():
            by_pid[pid]["sm_util"] = total / per_window
        # Split over every user's processes before a user is shown only theirs. A process
        # that has exited is charged as GONE: its PID may be another's by now.
        if "process_util" not in gpu.unsupported:
            shares: dict[int, float] = {}
            for pid, e in by_pid.items():
                who = pid if pid in running else GONE
                shares[who] = shares.get(who, 0.0) + e.get("sm_util", 0.0)
            gpu.split.charge(energy_j, shares)
            for pid, joules in gpu.split.by_pid.items():
                if pid in by_pid:
                    by_pid[pid]["energy_j"] = round(joules, 6)
            if GONE in gpu.split.by_pid:
                gpu.gone_j = gpu.split.by_pid[GONE]
        return self._own(sorted(by_pid.values(), key=lambda e: e["pid"]), gpu)

    def _own(self, procs: list[dict[str, Any]], gpu: Gpu) -> list[dict[str, Any]]:
        """The processes a user may see: NVML lists every user's (their PIDs and memory
        on the GPU) to anyone. Root sees them all; a user, their own, and the others
        only as a count and their memory together (`others` of the reading)."""
        gpu.others = None
        if self.euid == 0:
            return [self._named(p) for p in procs]
        mine, gpu.others = split_for(procs, self.euid)
        return [self._named(p) for p in mine]

    @staticmethod
    def _named(p: dict[str, Any]) -> dict[str, Any]:
        """The entry with its application's name, as the user knows it (the script a
        Python process runs, not `python3`), where /proc still has it."""
        name = process_name(p["pid"])
        return {**p, "name": name} if name else p

    def close(self) -> None:
        if self.state in ("ok", "degraded") and self.nvml is not None:
            with contextlib.suppress(self.nvml.NVMLError):
                self.nvml.nvmlShutdown()


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


class NvmlSource(CollectorSource):
    """NVIDIA GPUs through NVML: utilisation, memory, power, energy, per process."""

    name = "nvml"
    energy = ("nvml",)
    checks = (("nvml", check_nvml),)

    collector: NvmlCollector

    @classmethod
    def build(cls, ctx: SweepContext) -> NvmlSource:
        return cls(NvmlCollector(ctx.nvml))

    def state(self) -> SourceState:
        c = self.collector
        state = c.state if c.gpus or c.state != "ok" else "missing"
        return SourceState("nvml", state, c.reason or ("" if c.gpus else "no NVIDIA GPU"))

    def close(self) -> None:
        self.collector.close()
