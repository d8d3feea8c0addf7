"""What the task screen plots, computed without Textual: each device's fitted curve
over the sizes measured, the sizes where two devices' curves cross, and the
(time, energy) points of every device with the Pareto front among them."""

from __future__ import annotations

import itertools
import math

from adaptyst_top.snapshot import Curve, TaskEntry

SAMPLES = 48  # points along a fitted curve
Fit = tuple[float, float, float]


def _at(fit: Fit, n: float) -> float:
    a, b, c = fit
    return max(1e-12, float(a * n**b + c))


def size_range(curves: tuple[Curve, ...]) -> tuple[float, float] | None:
    sizes = [n for c in curves for n, _ in c.points if n > 0]
    return (min(sizes), max(sizes)) if sizes else None


def fitted(curve: Curve, lo: float, hi: float) -> tuple[list[float], list[float]]:
    """The curve's fit at SAMPLES sizes spaced evenly on a log scale over [lo, hi]."""
    if curve.fit is None or lo <= 0 or hi <= lo:
        return [], []
    xs = [lo * (hi / lo) ** (i / (SAMPLES - 1)) for i in range(SAMPLES)]
    return xs, [_at(curve.fit, x) for x in xs]


def crossovers(curves: tuple[Curve, ...]) -> list[tuple[float, str, str]]:
    """(size, faster below, faster above) where two fitted curves cross inside the sizes
    measured, found by bisection between the log-spaced samples that bracket it."""
    span = size_range(curves)
    fits = [(c.device, c.fit) for c in curves if c.fit is not None]
    if span is None:
        return []
    xs = [span[0] * (span[1] / span[0]) ** (i / (SAMPLES - 1)) for i in range(SAMPLES)]
    out = []
    for i, (one, f1) in enumerate(fits):
        for other, f2 in fits[i + 1 :]:

            def faster(n: float, f1: Fit = f1, f2: Fit = f2) -> bool:
                return _at(f1, n) < _at(f2, n)

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
