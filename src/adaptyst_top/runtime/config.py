"""~/.config/adaptyst-top/config.toml ($XDG_CONFIG_HOME respected); the CLI overrides it.

refresh = 1.0                # seconds
probes = ["uprobe:c:malloc"] # attached at start, with those given by --probe
budget = 2.0                 # probe overhead budget, % of the target's CPU time
ascii = false                # ASCII bars, sparklines and borders
theme = "textual-dark"       # any Textual theme
cpu_power_model = "40:180"   # IDLE_W:MAX_W, an estimate where RAPL is missing
stock_rendering = false      # true: Textual's own rendering and input, no fast paths

[thresholds]
util_warn = 0.9              # device utilisation shown as a warning above this
p99_warn_ms = 100.0          # probe rows with a p99 above this are shown as a warning
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptyst_top.collectors.probes.overhead import DEFAULT_BUDGET
from adaptyst_top.runtime.limits import (
    BUDGET_RANGE,
    DEFAULT_INTERVAL,
    INTERVAL_RANGE,
    check_range,
    fraction_of_percent,
)
from adaptyst_top.runtime.toml_file import read_toml


class ConfigError(ValueError):
    pass


@dataclass
class Config:
    refresh: float = DEFAULT_INTERVAL
    probes: list[str] = field(default_factory=list)
    budget: float = DEFAULT_BUDGET  # a fraction; the file says percent
    ascii: bool = False
    theme: str = "textual-dark"
    cpu_power_model: str | None = None
    stock_rendering: bool = False  # tui/textual_private.py: the fast paths off
    util_warn: float = 0.9
    p99_warn_ms: float = 100.0
    path: Path | None = None
    warnings: list[str] = field(default_factory=list)  # unknown keys, one line each


# (key, kind, range) per table; kind: number | bool | str | list-of-str.
_TOP: dict[str, tuple[str, tuple[float, float] | None]] = {
    "refresh": ("number", INTERVAL_RANGE),
    "probes": ("list of strings", None),
    "budget": ("number", BUDGET_RANGE),
    "ascii": ("boolean", None),
    "theme": ("string", None),
    "cpu_power_model": ("string", None),
    "stock_rendering": ("boolean", None),
    "thresholds": ("table", None),
}
_THRESHOLDS: dict[str, tuple[str, tuple[float, float] | None]] = {
    "util_warn": ("number", (0.0, 1.0)),
    "p99_warn_ms": ("number", (0.0, 3.6e6)),
}


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "adaptyst-top" / "config.toml"


def _line_of(text: str, key: str, table: str | None) -> int | None:
    """The line where KEY is set (in [TABLE] when given): TOML parsers do not say."""
    current = None
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("["):
            current = stripped.strip("[] ")
            continue
        if current == table and re.match(rf'^["\']?{re.escape(key)}["\']?\s*=', stripped):
            return n
    return None


def _checked(
    value: Any, key: str, kind: str, bounds: tuple[float, float] | None, where: str
) -> Any:
    ok = {
        "number": isinstance(value, (int, float)) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),  # strict: "no" or 0 is not a boolean
        "string": isinstance(value, str),
        "table": isinstance(value, dict),
        "list of strings": isinstance(value, list) and all(isinstance(v, str) for v in value),
    }[kind]
    if not ok:
        raise ConfigError(f"{where}: {key} must be a {kind}, not {value!r}")
    if bounds is not None:
        try:
            check_range(float(value), *bounds)
        except ValueError as exc:
            raise ConfigError(f"{where}: {key} {exc}") from None
    return value


def _unknown(key: str, known: dict[str, Any], where: str) -> str:
    near = difflib.get_close_matches(key, list(known), n=1)
    hint = f" (did you mean {near[0]}?)" if near else ""
    return f"{where}: unknown key {key} ignored{hint}"


def load_config(path: Path | None = None) -> Config:
    """The config file checked key by key: a wrong type or an out-of-range number is a
    ConfigError naming the key and its line; an unknown key is a warning."""
    path = path or config_path()
    cfg = Config()
    if not path.exists():
        return cfg
    try:
        text, data = read_toml(path)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    cfg.path = path

    def where(key: str, table: str | None = None) -> str:
        line = _line_of(text, key, table)
        return f"{path}:{line}" if line else str(path)

    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in _TOP:
            cfg.warnings.append(_unknown(key, _TOP, where(key)))
            continue
        values[key] = _checked(value, key, *_TOP[key], where(key))
    thresholds = values.get("thresholds", {})
    for key, value in thresholds.items():
        if key not in _THRESHOLDS:
            cfg.warnings.append(_unknown(key, _THRESHOLDS, where(key, "thresholds")))
            continue
        full = f"thresholds.{key}"
        values[key] = _checked(value, full, *_THRESHOLDS[key], where(key, "thresholds"))
    cfg.refresh = float(values.get("refresh", cfg.refresh))
    cfg.probes = list(values.get("probes", cfg.probes))
    if "budget" in values:
        cfg.budget = fraction_of_percent(float(values["budget"]))
    cfg.ascii = values.get("ascii", cfg.ascii)
    cfg.theme = values.get("theme", cfg.theme)
    cfg.cpu_power_model = values.get("cpu_power_model", cfg.cpu_power_model)
    cfg.stock_rendering = values.get("stock_rendering", cfg.stock_rendering)
    cfg.util_warn = float(values.get("util_warn", cfg.util_warn))
    cfg.p99_warn_ms = float(values.get("p99_warn_ms", cfg.p99_warn_ms))
    return cfg


def merged_settings(
    interval: float | None, budget: float | None, config: Config
) -> tuple[float, float]:
    """(interval, budget): the command line's (None when not given, however it was
    spelt: `--interval=2` too) over the config file's over the defaults (the config's own)."""
    return (
        config.refresh if interval is None else interval,
        config.budget if budget is None else budget,
    )
