"""FPGAs: Xilinx/AMD cards through XRT (pyxrt when importable, else the xocl driver's
XMC sensors in sysfs) and Intel cards through DFL hwmon. FPGA runtimes expose no
utilisation counter; probes on the runtime give it (say so in the note). Never run
on real FPGA hardware here: tested against fake sysfs trees with the drivers' names
and units (XMC: mV and mA; hwmon: µW, m°C)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptyst_top.collectors.devices.hwmon import hwmon_dirs, read_hwmon
from adaptyst_top.collectors.devices.opencl_inventory import list_opencl_devices
from adaptyst_top.collectors.devices.source import CollectorSource, SweepContext
from adaptyst_top.collectors.energy.account import EnergyAccount
from adaptyst_top.snapshot import DeviceReading, SourceState
from adaptyst_top.system.capability import Capability
from adaptyst_top.system.optional import import_optional

UTIL_NOTE = (
    "utilisation: not exposed by the runtime; probe it, e.g. "
    "uprobe:xrt_coreutil:*run* or the OpenCL clEnqueueNDRangeKernel"
)
# 12 V PCIe and AUX rails carry nearly all of a card's power; 3V3 is small but counted.
XMC_RAILS = (
    ("xmc_12v_pex_vol", "xmc_12v_pex_curr"),
    ("xmc_12v_aux_vol", "xmc_12v_aux_curr"),
    ("xmc_3v3_pex_vol", "xmc_3v3_pex_curr"),
    ("xmc_3v3_aux_vol", "xmc_3v3_aux_curr"),
)


@dataclass
class FpgaCard:
    id: str
    name: str
    kind: str  # xrt-sysfs | pyxrt | dfl
    path: Path | None = None
    handle: Any = None
    energy: EnergyAccount = field(default_factory=lambda: EnergyAccount("xrt"))


def _num(path: Path) -> float | None:
    try:
        return float(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def xmc_power_w(xmc: Path) -> tuple[float | None, float | None]:
    """Board power from the XMC rails (mV x mA), and the FPGA temperature (°C)."""
    total, seen = 0.0, False
    for vol, cur in XMC_RAILS:
        v, i = _num(xmc / vol), _num(xmc / cur)
        if v is not None and i is not None:
            total += v * i / 1e6
            seen = True
    return (total if seen else None), _num(xmc / "xmc_fpga_temp")


class FpgaCollector:
    def __init__(self, sysfs: Path = Path("/sys"), pyxrt: Any | None = None) -> None:
        self.cards: list[FpgaCard] = []
        xrt: Any = pyxrt if pyxrt is not None else import_optional("pyxrt")
        self.xrt: Any = xrt
        if xrt is not None:
            i = 0
            while True:
                try:
                    dev = xrt.device(i)
                except Exception:  # pyxrt raises RuntimeError past the last card
                    break
                self.cards.append(FpgaCard(f"fpga:{i}", f"XRT device {i}", "pyxrt", handle=dev))
                i += 1
        else:
            for pci in sorted((sysfs / "bus/pci/drivers/xocl").glob("0000:*")):
                xmc = next(iter(sorted(pci.glob("xmc.*"))), None)
                self.cards.append(
                    FpgaCard(f"fpga:{pci.name}", f"Xilinx card {pci.name}", "xrt-sysfs", xmc)
                )
        for dfl in sorted((sysfs / "bus/dfl/devices").glob("dfl*")):
            for hw in hwmon_dirs(dfl):
                self.cards.append(
                    FpgaCard(
                        f"fpga:{dfl.name}",
                        f"Intel FPGA {dfl.name}",
                        "dfl",
                        hw,
                        energy=EnergyAccount("hwmon"),
                    )
                )

    def read(self, now: float | None = None) -> list[DeviceReading]:
        now = time.monotonic() if now is None else now
        return [self._read(c, now) for c in self.cards]

    def _read(self, card: FpgaCard, now: float) -> DeviceReading:
        r = DeviceReading(id=card.id, kind="fpga", name=card.name, note=UTIL_NOTE)
        power_w: float | None = None
        counter_j: float | None = None
        if card.kind == "pyxrt":
            power_w, r.temp_c = self._pyxrt(card)
        elif card.kind == "xrt-sysfs" and card.path is not None:
            power_w, r.temp_c = xmc_power_w(card.path)
        elif card.kind == "dfl" and card.path is not None:
            s = read_hwmon(card.path)
            power_w, counter_j, r.temp_c = s.power_w, s.energy_j, s.temp_c
        e = card.energy.update(now, counter_j=counter_j, power_w=power_w)
        r.set_energy(e, power_w)
        if e.source is None:
            r.note = "no power sensor readable on this card; " + UTIL_NOTE
        return r

    def _pyxrt(self, card: FpgaCard) -> tuple[float | None, float | None]:
        xrt = self.xrt
        try:
            elec = json.loads(card.handle.get_info(xrt.xrt_info_device.electrical))
            power = float(elec["power_consumption_watts"])
        except Exception:
            power = None
        try:
            thermal = json.loads(card.handle.get_info(xrt.xrt_info_device.thermal))
            temps = [float(t["temp_C"]) for t in thermal.get("thermals", []) if "temp_C" in t]
            temp = max(temps) if temps else None
        except Exception:
            temp = None
        return power, temp


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


class FpgaSource(CollectorSource):
    """FPGA cards through XRT or the Intel DFL driver's sysfs."""

    name = "fpga"
    energy = ("xrt", "hwmon")
    checks = (("fpga", check_fpga),)

    collector: FpgaCollector

    @classmethod
    def build(cls, ctx: SweepContext) -> FpgaSource:
        return cls(FpgaCollector(ctx.sysfs))

    def state(self) -> SourceState:
        found = bool(self.collector.cards)
        why = "" if found else "no FPGA card (XRT or DFL)"
        return SourceState("fpga", "ok" if found else "missing", why)
