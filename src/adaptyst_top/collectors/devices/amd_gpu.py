"""AMD GPUs: the amdgpu driver's sysfs (always there with the driver), and amdsmi
when importable for what sysfs lacks. Never run on real AMD hardware here: tested
against fake sysfs trees with the driver's file names and units."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptyst_top.collectors.devices.energy import EnergyAccount
from adaptyst_top.collectors.devices.hwmon import hwmon_dirs, read_hwmon
from adaptyst_top.snapshot import DeviceReading
from adaptyst_top.system.optional import import_optional

AMD_PCI_VENDOR = "0x1002"


@dataclass
class AmdCard:
    index: int
    device: Path  # /sys/class/drm/cardN/device
    pci_bus_id: str
    energy: EnergyAccount = field(default_factory=lambda: EnergyAccount("hwmon"))


def _int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def find_cards(sysfs: Path = Path("/sys")) -> list[AmdCard]:
    cards: list[AmdCard] = []
    for card in sorted((sysfs / "class/drm").glob("card[0-9]*")):
        if "-" in card.name:  # connectors such as card0-DP-1
            continue
        dev = card / "device"
        try:
            if (dev / "vendor").read_text().strip() != AMD_PCI_VENDOR:
                continue
        except OSError:
            continue
        bus = dev.resolve().name if dev.is_symlink() else ""
        cards.append(AmdCard(len(cards), dev, bus.lower()))
    return cards


class AmdGpuCollector:
    def __init__(self, sysfs: Path = Path("/sys"), amdsmi: Any | None = None) -> None:
        self.cards = find_cards(sysfs)
        self.smi: Any = amdsmi if amdsmi is not None else import_optional("amdsmi")
        self.smi_handles: dict[str, Any] = {}
        if self.smi is not None and self.cards:
            self._init_smi()

    def _init_smi(self) -> None:
        smi = self.smi
        try:
            smi.amdsmi_init()
            for h in smi.amdsmi_get_processor_handles():
                self.smi_handles[str(smi.amdsmi_get_gpu_device_bdf(h)).lower()] = h
        except Exception:  # amdsmi raises AmdSmiLibraryException and friends
            self.smi = None

    def read(self, now: float | None = None) -> list[DeviceReading]:
        now = time.monotonic() if now is None else now
        return [self._read_card(c, now) for c in self.cards]

    def _read_card(self, card: AmdCard, now: float) -> DeviceReading:
        dev = card.device
        r = DeviceReading(id=f"amdgpu:{card.index}", kind="gpu", name="AMD GPU")
        r.extra["pci_bus_id"] = card.pci_bus_id
        busy = _int(dev / "gpu_busy_percent")
        r.util = None if busy is None else busy / 100.0
        r.mem_used_bytes = _int(dev / "mem_info_vram_used")
        r.mem_total_bytes = _int(dev / "mem_info_vram_total")
        power_w = counter_j = None
        source = "hwmon"
        for d in hwmon_dirs(dev):
            s = read_hwmon(d)
            power_w = s.power_w if s.power_w is not None else power_w
            counter_j = s.energy_j if s.energy_j is not None else counter_j
            r.temp_c = s.temp_c if s.temp_c is not None else r.temp_c
            if s.denied:
                r.note = "hwmon power not readable: run as root"
        smi_h = self.smi_handles.get(card.pci_bus_id)
        if smi_h is not None:
            power_w, counter_j = self._smi_power(smi_h, power_w, counter_j)
            source = "amdsmi"
        if card.energy.counter_source != source:
            card.energy = EnergyAccount(source)
        e = card.energy.update(now, counter_j=counter_j, power_w=power_w)
        r.set_energy(e, power_w)
        if e.source is None and not r.note:
            r.note = "no power sensor (hwmon power1_average/energy1_input) on this card"
        return r

    def _smi_power(
        self, h: Any, power_w: float | None, counter_j: float | None
    ) -> tuple[float | None, float | None]:
        smi = self.smi
        try:
            info = smi.amdsmi_get_power_info(h)
            avg = info.get("average_socket_power")
            if isinstance(avg, (int, float)):
                power_w = float(avg)  # W in amdsmi >= 6.0
        except Exception:
            pass
        try:
            e = smi.amdsmi_get_energy_count(h)
            acc = e.get("energy_accumulator", e.get("power"))
            res = e.get("counter_resolution")  # µJ per count
            if isinstance(acc, (int, float)) and isinstance(res, (int, float)):
                counter_j = acc * res / 1e6
        except Exception:
            pass
        return power_w, counter_j
