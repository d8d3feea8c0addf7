"""~/.config/adaptyst-top/config.toml ($XDG_CONFIG_HOME respected); the CLI overrides it.

refresh = 1.0                # seconds
probes = ["uprobe:c:malloc"] # attached at start, with those given by --probe
budget = 2.0                 # probe overhead budget, % of the target's CPU time
ascii = false                # ASCII bars, sparklines and borders
theme = "textual-dark"       # any Textual theme
cpu_power_model = "40:180"   # IDLE_W:MAX_W, an estimate where RAPL is missing

[thresholds]
util_warn = 0.9              # device utilisation shown as a warning above this
p99_warn_ms = 100.0          # probe rows with a p99 above this are shown as a warning
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


class ConfigError(ValueError):
    pass


@dataclass
class Config:
    refresh: float = 1.0
    probes: list[str] = field(default_factory=list)
    budget: float = 0.02  # a fraction; the file says percent
    ascii: bool = False
    theme: str = "textual-dark"
    cpu_power_model: str | None = None
    util_warn: float = 0.9
    p99_warn_ms: float = 100.0
    path: Path | None = None


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "adaptyst-top" / "config.toml"


def load_config(path: Path | None = None) -> Config:
    path = path or config_path()
    cfg = Config()
    if not path.exists():
        return cfg
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    cfg.path = path
    try:
        cfg.refresh = float(data.get("refresh", cfg.refresh))
        cfg.probes = [str(p) for p in data.get("probes", [])]
        cfg.budget = float(data.get("budget", cfg.budget * 100)) / 100.0
        cfg.ascii = bool(data.get("ascii", cfg.ascii))
        cfg.theme = str(data.get("theme", cfg.theme))
        model = data.get("cpu_power_model")
        cfg.cpu_power_model = None if model is None else str(model)
        th = data.get("thresholds", {})
        cfg.util_warn = float(th.get("util_warn", cfg.util_warn))
        cfg.p99_warn_ms = float(th.get("p99_warn_ms", cfg.p99_warn_ms))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if cfg.refresh <= 0:
        raise ConfigError(f"{path}: refresh must be > 0")
    return cfg
