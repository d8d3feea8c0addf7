"""OpenCL devices as execution targets, each mapped to the physical device whose
power it draws: PoCL's CPU device to the CPU, an NVIDIA or AMD OpenCL GPU to its
NVML/amdgpu device by PCI bus id. The placement advisor chooses between these."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from adaptyst_top.collectors.devices.opencl_inventory import (
    OpenCLDevice,
    list_opencl_devices,
    shared_listing,
)
from adaptyst_top.collectors.devices.source import CollectorSource, SweepContext
from adaptyst_top.snapshot import DeviceReading, SourceState
from adaptyst_top.system.capability import Capability


def physical_id(dev: OpenCLDevice, physical: list[DeviceReading]) -> str | None:
    if dev.type == "cpu":
        return "cpu"
    if dev.pci_bus_id:
        want = dev.pci_bus_id.lower()
        for p in physical:
            bus = str(p.extra.get("pci_bus_id", "")).lower()
            # NVML reports 8-digit domains (00000000:17:00.0), OpenCL 4-digit ones.
            if bus and bus.split(":", 1)[-1] == want.split(":", 1)[-1]:
                return str(p.id)
    return None


class OpenCLCollector:
    """Lists devices once (enumeration is slow; the process's listing is shared by its
    collectors for a while, opencl_inventory.SharedListing), in a child process, while
    the rest starts (a launched command does not wait for it: 0.18 s here); the first
    look at `devices` waits for the list. Each read copies the mapped device's
    utilisation and power, saying where they come from."""

    def __init__(self, lister: Callable[[], list[OpenCLDevice]] = shared_listing) -> None:
        self._devices: list[OpenCLDevice] = []
        self._reason = ""
        self._listed = threading.Event()
        self._lister = lister
        threading.Thread(target=self._list, name="opencl-list", daemon=True).start()

    def _list(self) -> None:
        try:
            self._devices = self._lister()
        except Exception as exc:  # a device list is never worth a monitor that won't start
            self._reason = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        finally:
            self._listed.set()

    @property
    def devices(self) -> list[OpenCLDevice]:
        self._listed.wait()
        return self._devices

    @property
    def reason(self) -> str:
        self._listed.wait()
        return self._reason

    def read(self, physical: list[DeviceReading]) -> list[DeviceReading]:
        by_id = {p.id: p for p in physical}
        out = []
        for i, dev in enumerate(self.devices):
            r = DeviceReading(
                id=f"opencl:{i}",
                kind="opencl",
                name=f"{dev.name} [{dev.platform}]",
                mem_total_bytes=dev.global_mem_bytes,
            )
            r.extra = {
                "platform": dev.platform,
                "type": dev.type,
                "compute_units": dev.compute_units,
                "pci_bus_id": dev.pci_bus_id,
            }
            target = physical_id(dev, physical)
            r.extra["maps_to"] = target
            phys = by_id.get(target) if target else None
            if phys is not None:
                r.util, r.power_w = phys.util, phys.power_w
                r.note = f"utilisation and power are {phys.id}'s (the device it runs on)"
            else:
                r.note = "no physical device found for it: utilisation and power unknown"
            out.append(r)
        return out


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


class OpenCLSource(CollectorSource):
    """OpenCL devices (PoCL's CPU device among them), each tied to the physical device
    it runs on: read after the physical sources, from what they found."""

    name = "opencl"
    checks = (("opencl", check_opencl),)

    collector: OpenCLCollector

    @classmethod
    def build(cls, ctx: SweepContext) -> OpenCLSource:
        return cls(ctx.opencl if ctx.opencl is not None else OpenCLCollector())

    def read(self, now: float, found: Sequence[DeviceReading]) -> list[DeviceReading]:
        return self.collector.read(list(found))

    def state(self) -> SourceState:
        c = self.collector
        return SourceState("opencl", "ok" if c.devices else "missing", c.reason)
