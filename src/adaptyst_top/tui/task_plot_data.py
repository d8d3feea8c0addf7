"""What the task screen plots, computed without Textual: each device's fitted curve
(or the learner's prediction with its one-sigma band) over the sizes measured, the sizes where two devices' curves cross, and the
(time, energy) points of every device with the Pareto front among them."""

from __future__ import annotations

import itertools
import math

from adaptyst_top.snapshot import Curve, TaskEntry

SAMPLES = 48  # points along a fitted curve
Fit = tuple[float, float, float]


def _at(fit: Fit, n: float) -> float:
    """The fit at N; inf where it overflows (a crafted or absurd fit): never drawn."""
    a, b, c = fit
    try:
        return max(1e-12, float(a * n**b + c))
    except (OverflowError, ZeroDivisionError):
        return math.inf


def _curve_at(curve: Curve, n: float) -> float:
    return _at(curve.fit, n) if curve.fit is not None else _median_at(curve, n)


def size_range(curves: tuple[Curve, ...]) -> tuple[float, float] | None:
    sizes = [n for c in curves for n, *_ in c.points + c.band if 0 < n < math.inf]
    return (min(sizes), max(sizes)) if sizes else None


def fitted(curve: Curve, lo: float, hi: float) -> tuple[list[float], list[float]]:
    """The curve's fit at SAMPLES sizes spaced evenly on a log scale over [lo, hi];
    the learner's predicted medians (its band) where it has no fit."""
    if curve.fit is None:
        return band(curve, 0)
    if lo <= 0 or hi <= lo:
        return [], []
    xs = [lo * (hi / lo) ** (i / (SAMPLES - 1)) for i in range(SAMPLES)]
    points = [(x, y) for x in xs if math.isfinite(y := _at(curve.fit, x))]
    return [x for x, _ in points], [y for _, y in points]


def band(curve: Curve, sigmas: int) -> tuple[list[float], list[float]]:
    """The learner's prediction SIGMAS sigmas from its median (-1: below, 1: above)."""
    points = [
        (n, s * f**sigmas)
        for n, s, f in curve.band
        if 0 < n < math.inf and 0 < s < math.inf and 1 <= f < math.inf
    ]
    return [n for n, _ in points], [s for _, s in points]


def _median_at(curve: Curve, n: float) -> float:
    """The band's median at N, log-linear between its sizes (inf outside them)."""
    for (n0, s0), (n1, s1) in itertools.pairwise(zip(*band(curve, 0), strict=True)):
        if n0 <= n <= n1 and n1 > n0:
            w = math.log(n / n0) / math.log(n1 / n0)
            return math.exp((1 - w) * math.log(s0) + w * math.log(s1))
    return math.inf


def crossovers(curves: tuple[Curve, ...]) -> list[tuple[float, str, str]]:
    """(size, faster below, faster above) where two fitted curves cross inside the sizes
    measured, found by bisection between the log-spaced samples that bracket it."""
    span = size_range(curves)
    fits = [(c.device, c) for c in curves if c.fit is not None or c.band]
    if span is None:
        return []
    xs = [span[0] * (span[1] / span[0]) ** (i / (SAMPLES - 1)) for i in range(SAMPLES)]
    out = []
    for i, (one, c1) in enumerate(fits):
        for other, c2 in fits[i + 1 :]:

            def faster(n: float, c1: Curve = c1, c2: Curve = c2) -> bool:
                return _curve_at(c1, n) < _curve_at(c2, n)

            for a, b in itertools.pairwise(xs):
                if faster(a) == faster(b):
                    continue
                first = faster(a)
                for _ in range(40):
                    mid = math.sqrt(a * b)
                    a, b = (mid, b) if faster(mid) == first else (a, mid)
                below, above = (one, other) if first else (other, one)
                out.append((math.sqrt(a * b), below, above))
    return sorted(out)


def energy_points(t: TaskEntry) -> list[tuple[str, float, float, bool]]:
    """(device, time_s, energy_j, on the Pareto front) of each device with both figures."""
    front = {p[0] for p in t.pareto if p}
    out = []
    for device, p in t.predicted.items():
        time_s, energy = p.get("time_s"), p.get("energy_j")
        if not (isinstance(time_s, (int, float)) and isinstance(energy, (int, float))):
            continue
        if time_s > 0 and energy > 0:
            out.append((device, float(time_s), float(energy), device in front))
    return sorted(out, key=lambda x: x[1])


def log_ticks(lo: float, hi: float) -> list[float]:
    """Round values to mark a log axis over [lo, hi]: the powers of ten in it, with the
    2x and 5x steps between them while fewer than three fit, else its two ends."""
    if not (0 < lo <= hi and math.isfinite(hi)):
        return []
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    decades = [10.0**e for e in range(first, last + 1)]
    for steps in ((1,), (1, 2, 5), (1, 1.5, 2, 3, 5, 7)):
        ticks = [d * m for d in decades for m in steps if lo <= d * m <= hi]
        if len(ticks) >= 3:
            return ticks
    return ticks if len(ticks) >= 2 else sorted({lo, hi})


def fmt_size(n: float) -> str:
    """An input size on an axis: "512", "32k", "1.5M" (a raw 370727.6 said nothing)."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:.3g}"


def linear_ticks(values: list[float], count: int = 4) -> list[float]:
    """COUNT evenly spaced values over the span of VALUES, to mark a linear axis."""
    lo, hi = min(values), max(values)
    if hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / (count - 1) for i in range(count)]
