"""The ranges every number a user gives must fall in, defined once for the command line
and the config file alike."""

from __future__ import annotations

import math

# Every number the user gives is finite and in a stated range (a NaN interval once
# meant a busy loop that ignored every key and signal).
INTERVAL_RANGE = (0.05, 3600.0)  # seconds between snapshots
DEFAULT_INTERVAL = 1.0
DURATION_RANGE = (0.0, 366 * 86400.0)  # seconds; > 0
BUDGET_RANGE = (0.0, 100.0)  # percent of the target's CPU; > 0
SPEED_RANGE = (0.01, 1000.0)  # replay speed
PHASE_RANGE = (0.5, 3600.0)  # demo phase, seconds
MAX_PROBES_RANGE = (1, 100_000)


def fraction_of_percent(value: float) -> float:
    """VALUE (a percent, > 0) as a fraction, still > 0: 5e-324 % would underflow to 0."""
    return value / 100.0 or math.ulp(0.0)


def check_range(
    value: float, lo: float, hi: float, what: str = "", low_open: bool | None = None
) -> float:
    """VALUE when finite and lo <= VALUE <= hi (lo excluded when LOW_OPEN, by default
    when it is 0); else ValueError."""
    if low_open is None:
        low_open = lo == 0
    low_ok = value > lo if low_open else value >= lo
    if not math.isfinite(value) or not low_ok or value > hi:
        bound = f"> {lo:g} and <= {hi:g}" if low_open else f"in {lo:g}..{hi:g}"
        raise ValueError(f"{what}must be a finite number {bound}, not {value!r}")
    return value
