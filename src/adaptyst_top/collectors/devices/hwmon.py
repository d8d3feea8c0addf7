"""Linux hwmon sensors, in the kernel's units: power in µW, energy in µJ, temperature in m°C."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class HwmonSample:
    power_w: float | None = None
    energy_j: float | None = None  # a counter (energy1_input), not energy since start
    temp_c: float | None = None
    denied: bool = False


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def read_hwmon(directory: Path) -> HwmonSample:
    s = HwmonSample()
    for name in ("power1_average", "power1_input"):
        f = directory / name
        if f.exists():
            try:
                s.power_w = int(f.read_text().strip()) / 1e6
            except PermissionError:
                s.denied = True
            except (OSError, ValueError):
                pass
            if s.power_w is not None:
                break
    energy = _read_int(directory / "energy1_input")
    s.energy_j = None if energy is None else energy / 1e6
    temp = _read_int(directory / "temp1_input")
    s.temp_c = None if temp is None else temp / 1000.0
    return s


def hwmon_dirs(device_dir: Path) -> list[Path]:
    return sorted(device_dir.glob("hwmon/hwmon*"))
