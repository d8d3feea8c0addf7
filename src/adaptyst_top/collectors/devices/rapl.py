"""Linux powercap RAPL (Intel, and AMD Zen through the same driver), read from sysfs.

Zones nest: package-N contains core and uncore; dram is a sibling domain under the
package on Intel; psys (platform) contains package and dram. The CPU's energy is
therefore psys alone when present, else every package plus every dram zone, never
a parent and its children together. Since CVE-2020-8694 energy_uj is readable by
root only: that is the `denied` state, with the reason, never a zero.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from adaptyst_top.collectors.energy.account import EnergyAccount
from adaptyst_top.snapshot import EnergyReading, SourceStatus
from adaptyst_top.system.capability import Capability


@dataclass(frozen=True)
class RaplZone:
    id: str  # e.g. intel-rapl:0 or intel-rapl:0:2
    name: str  # package-0, core, uncore, dram, psys
    path: Path

    @property
    def top_level(self) -> bool:
        return self.id.count(":") == 1


def discover(sysfs: Path = Path("/sys")) -> list[RaplZone]:
    base = sysfs / "class/powercap"
    zones = []
    for p in sorted(base.glob("*-rapl:*")):
        if not (p / "energy_uj").exists():
            continue
        try:
            name = (p / "name").read_text().strip()
        except OSError:
            name = p.name
        zones.append(RaplZone(p.name, name, p))
    return zones


def accounted(zones: list[RaplZone]) -> list[RaplZone]:
    """The zones whose sum is the CPU's energy, with nothing counted twice."""
    psys = [z for z in zones if z.name.startswith("psys")]
    if psys:
        return psys
    packages = [z for z in zones if z.top_level and z.name.startswith("package")]
    dram = [z for z in zones if z.name == "dram"]
    return packages + dram


class RaplReader:
    def __init__(self, sysfs: Path = Path("/sys")) -> None:
        self.zones = accounted(discover(sysfs))
        self.accounts = {z.id: EnergyAccount("rapl") for z in self.zones}
        self.ranges: dict[str, float | None] = {}
        self.reads = 0
        self.state: SourceStatus = "ok" if self.zones else "missing"
        self.reason = "" if self.zones else "no powercap RAPL zones (virtual machine or no driver)"
        for z in self.zones:
            try:
                self.ranges[z.id] = int((z.path / "max_energy_range_uj").read_text()) / 1e6
            except (OSError, ValueError):
                self.ranges[z.id] = None

    def read(self, now: float | None = None) -> EnergyReading | None:
        """The CPU's energy since the first read; None when missing or denied."""
        if self.state != "ok":
            return None
        now = time.monotonic() if now is None else now
        total = 0.0
        power = 0.0
        for z in self.zones:
            try:
                counter = int((z.path / "energy_uj").read_text()) / 1e6
            except PermissionError:
                self.state = "denied"
                self.reason = "RAPL energy_uj is readable by root only (CVE-2020-8694): run as root"
                return None
            except (OSError, ValueError) as exc:
                self.state = "missing"
                self.reason = f"reading {z.path / 'energy_uj'} failed: {exc}"
                return None
            r = self.accounts[z.id].update(
                now, counter_j=counter, counter_range_j=self.ranges[z.id]
            )
            total += r.energy_j or 0.0
            power += r.power_w or 0.0
        self.reads += 1
        # Power needs an interval: none on the first read.
        return EnergyReading(total, power if self.reads > 1 else None, "rapl", "counter")


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
