"""AMD GPUs: the amdgpu driver's sysfs (always there with the driver), and amdsmi
when importable for what sysfs lacks: power, the energy counter, and each process's
GFX engine time, which splits the card's energy over its processes as NVML's
utilisation does on NVIDIA (gpu_energy.py; method `amdsmi-process-gfx`). Never run on
real AMD hardware here: tested against fake sysfs trees with the driver's file names
and units, and a fake amdsmi with its names, units and exceptions."""

from __future__ import annotations

import importlib.util
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptyst_top.collectors.devices.hwmon import hwmon_dirs, read_hwmon
from adaptyst_top.collectors.devices.source import CollectorSource, SweepContext
from adaptyst_top.collectors.energy.account import EnergyAccount
from adaptyst_top.collectors.energy.gpu_processes import split_for
from adaptyst_top.collectors.energy.gpu_split import (
    AMD_METHOD,
    PROCESS_EVERY_S,
    ProcessEnergySplit,
)
from adaptyst_top.snapshot import DeviceReading, EnergySource, SourceState
from adaptyst_top.system.capability import Capability, Status
from adaptyst_top.system.optional import import_optional

AMD_PCI_VENDOR = "0x1002"


@dataclass
class AmdCard:
    index: int
    device: Path  # /sys/class/drm/cardN/device
    pci_bus_id: str
    energy: EnergyAccount = field(default_factory=lambda: EnergyAccount("hwmon"))
    split: ProcessEnergySplit = field(default_factory=ProcessEnergySplit)
    gfx_ns: dict[int, int] = field(default_factory=dict)  # pid -> its GFX time at last read
    processes: list[dict[str, Any]] = field(default_factory=list)
    processes_at: float | None = None
    others: dict[str, int] | None = None
    process_error: str | None = None


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
        self.euid = os.geteuid()
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
        source: EnergySource = "hwmon"
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
        if smi_h is not None:
            self._processes(card, smi_h, e.energy_j, now, r)
        return r

    def _processes(
        self, card: AmdCard, h: Any, energy_j: float | None, now: float, r: DeviceReading
    ) -> None:
        """Each process's share of the window: its GFX engine time (ns, cumulative, from
        the driver's fdinfo) since the last read, over the window's length. A process
        that exited between reads is listed no more: its part counts as idle."""
        if card.processes_at is None or now - card.processes_at >= PROCESS_EVERY_S:
            window_ns = None if card.processes_at is None else (now - card.processes_at) * 1e9
            card.processes_at = now
            try:
                listed = self.smi.amdsmi_get_gpu_process_list(h)
                card.process_error = None
            except Exception as exc:  # AmdSmiLibraryException: NOT_SUPPORTED on some parts
                listed, card.process_error = [], type(exc).__name__
            shares: dict[int, float] = {}
            gfx_now: dict[int, int] = {}
            procs: list[dict[str, Any]] = []
            for p in listed if isinstance(listed, list) else []:
                try:
                    pid = int(p["pid"])
                    gfx = int((p.get("engine_usage") or {}).get("gfx", 0))
                except (KeyError, TypeError, ValueError, AttributeError):
                    continue
                gfx_now[pid] = gfx
                before = card.gfx_ns.get(pid)
                if window_ns and before is not None and gfx >= before:
                    shares[pid] = min(1.0, (gfx - before) / window_ns)
                mem = p.get("mem")
                procs.append({"pid": pid, "mem_bytes": mem if isinstance(mem, int) else None})
            card.gfx_ns = gfx_now
            card.split.charge(energy_j, shares)
            for entry in procs:
                if entry["pid"] in shares:
                    entry["gfx_util"] = round(shares[entry["pid"]], 4)
                if entry["pid"] in card.split.by_pid:
                    entry["energy_j"] = round(card.split.by_pid[entry["pid"]], 6)
            card.processes, card.others = procs, None
            if self.euid != 0:  # a user sees their own processes, the others in total
                card.processes, card.others = split_for(procs, self.euid)
        if card.process_error is not None:
            r.extra["process_energy"] = f"none: amdsmi lists no processes ({card.process_error})"
        elif card.split.measured_j:
            r.extra["process_energy"] = AMD_METHOD
            r.extra["idle_j"] = round(card.split.idle_j, 6)
        r.extra["processes"] = card.processes
        if card.others is not None:
            r.extra["processes_of_others"] = card.others

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


AMD_PCI_VENDOR = "0x1002"


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


class AmdGpuSource(CollectorSource):
    """AMD GPUs through the amdgpu driver's sysfs (and amdsmi where installed)."""

    name = "amd-gpu"
    energy = ("amdsmi", "hwmon")
    checks = (("amd-gpu", check_amd_gpu),)

    collector: AmdGpuCollector

    @classmethod
    def build(cls, ctx: SweepContext) -> AmdGpuSource:
        return cls(AmdGpuCollector(ctx.sysfs))

    def state(self) -> SourceState:
        found = bool(self.collector.cards)
        return SourceState("amd-gpu", "ok" if found else "missing", "" if found else "no AMD GPU")
