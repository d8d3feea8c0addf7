"""Human-readable numbers for the panes."""

from __future__ import annotations


def fmt_bytes(n: int | float | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def fmt_bytes_short(n: int | float) -> str:
    """Bytes in at most 5 characters, as top's columns have them: 512B, 9.8K, 123M,
    1.5G (fmt_bytes' "1023.9 MiB" overflowed the process list's column)."""
    value = max(0.0, float(n))
    for unit in ("B", "K", "M", "G", "T"):
        if value < 999.5:
            return f"{value:.1f}{unit}" if unit != "B" and value < 9.95 else f"{value:.0f}{unit}"
        value /= 1024
    return f"{value:.0f}P"


def fmt_energy(j: float) -> str:
    """Joules to three figures or so: an H200 draws ~2 MJ an hour at full load, which
    reads better as "2.52 MJ" than as "2520000.0 J"."""
    for unit, scale in (("GJ", 1e9), ("MJ", 1e6), ("kJ", 1e3)):
        if abs(j) >= scale:
            value = j / scale
            digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
            return f"{value:.{digits}f} {unit}"
    if 0 < abs(j) < 1:  # a task's run: "2.1 mJ", not "0.0 J"
        for unit, scale in (("mJ", 1e-3), ("µJ", 1e-6)):
            if abs(j) >= scale or unit == "µJ":
                return f"{j / scale:.3g} {unit}"
    return f"{j:.1f} J"


def fmt_ns(ns: float | None) -> str:
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


# A function's latency below this is within what subtracting the probe's own cost
# leaves uncertain (a uprobe pair costs ~1-2 µs here): shown as "<1 µs", never "0 ns".
LATENCY_FLOOR_NS = 1000.0


def fmt_latency(ns: float | None) -> str:
    """A function's latency, net of the probe's cost: below LATENCY_FLOOR_NS it is
    "<1 µs" (a net figure clamps to 0 where the probe costs more than the call)."""
    if ns is not None and ns < LATENCY_FLOOR_NS:
        return "<1 µs"
    return fmt_ns(ns)


def fmt_count(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n:,}"


def fmt_rate(hz: float | None) -> str:
    if hz is None:
        return "-"
    return f"{hz:,.1f}"
