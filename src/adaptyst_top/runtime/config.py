"""The user's config: ~/.config/adaptyst-top/config.toml ($XDG_CONFIG_HOME respected);
the command line overrides it. Every key is declared once below (runtime/settings_model.py);
docs/config.toml, written from these declarations, shows each with its default."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from adaptyst_top.collectors.probes.cost.overhead import DEFAULT_BUDGET
from adaptyst_top.runtime.limits import BUDGET_RANGE, DEFAULT_INTERVAL, INTERVAL_RANGE
from adaptyst_top.runtime.settings_model import SettingsError, read_settings, setting
from adaptyst_top.runtime.toml_file import read_toml

HEADER = """adaptyst-top's config: ~/.config/adaptyst-top/config.toml ($XDG_CONFIG_HOME respected).
Every key is optional; the values shown are the defaults. The command line overrides
them. A key of the wrong type or out of range stops the monitor, naming its line; an
unknown key is a warning naming the nearest known one."""


class ConfigError(SettingsError):
    pass


@dataclass
class Config:
    refresh: float = setting(DEFAULT_INTERVAL, "Seconds between snapshots.", range=INTERVAL_RANGE)
    probes: list[str] = setting([], "Probe specs attached at start, with those of --probe.")
    budget: float = setting(
        DEFAULT_BUDGET,
        "The probes' overhead budget, in percent of the target's CPU time.",
        range=BUDGET_RANGE,
        low_open=True,
        percent=True,
    )
    ascii: bool = setting(False, "ASCII bars, sparklines and borders.")
    theme: str = setting("textual-dark", "Any Textual theme.")
    cpu_power_model: str | None = setting(
        None,
        "IDLE_W:MAX_W, the CPU's power estimated from its load where RAPL is missing\n"
        "(unset: no estimate).",
        example="40:180",
    )
    stock_rendering: bool = setting(
        False, "true: Textual's own rendering and input, without the fast paths."
    )
    util_warn: float = setting(
        0.9,
        "Device utilisation shown as a warning above this fraction.",
        range=(0.0, 1.0),
        low_open=True,
        table="thresholds",
    )
    p99_warn_ms: float = setting(
        100.0,
        "Probe rows with a p99 above this many ms are shown as a warning.",
        range=(0.0, 3.6e6),
        low_open=True,
        table="thresholds",
    )
    path: Path | None = None  # the file read, None without one
    warnings: list[str] = field(default_factory=list)  # unknown keys, one line each


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "adaptyst-top" / "config.toml"


def load_config(path: Path | None = None) -> Config:
    """The config file checked key by key: a wrong type or an out-of-range number is a
    ConfigError naming the key and its line; an unknown key is a warning."""
    path = path or config_path()
    if not path.exists():
        return Config()
    try:
        text, data = read_toml(path)
        config, warnings = read_settings(Config, data, text, str(path), "warn", path=path)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    config.warnings = warnings
    return config


def merged_settings(
    interval: float | None, budget: float | None, config: Config
) -> tuple[float, float]:
    """(interval, budget): the command line's (None when not given, however it was
    spelt: `--interval=2` too) over the config file's over the defaults (the config's own)."""
    return (
        config.refresh if interval is None else interval,
        config.budget if budget is None else budget,
    )
