"""What a task costs on a device, learned online from measured executions.

Per (task, device): statistics per input bucket (log2 size x feature bucket) with
outlier rejection and drift detection, and a fitted t(n) = a*n^b + c over sizes,
trusted once it rests on enough samples from enough sizes, for inputs not seen yet.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from adaptyst_top.placement.prediction import Context as Context
from adaptyst_top.placement.prediction import Prediction as Prediction
from adaptyst_top.placement.prediction import pareto_front as pareto_front

MIN_BUCKET_SAMPLES = 2
FIT_MIN_SAMPLES = 6
FIT_MIN_BUCKETS = 3
OUTLIER_SIGMAS = 4.0
DRIFT_RATIO = 0.35  # recent mean this far from the long one, sustained: the device changed
DRIFT_RUNS = 3  # ... for this many values in a row: the model starts over from them
EWMA_ALPHA = 0.3


def bucket_size(size_bucket: int) -> float:
    """A representative input size for a log2 bucket (its geometric middle)."""
    return float(2 ** (size_bucket + 0.5))


RECENT_VALUES = 64  # values behind the uncertainty estimate
# A model kept from an earlier run weighs as this many runs at most: a prior that the
# first few runs of this one can overturn (the machine or the inputs may have changed).
PRIOR_MAX_N = 6
KEPT_RECENT = 16  # recent values kept with a model
ROBUST_FIRST = 7  # the first values: their median is the mean (a first run carries a transfer)


@dataclass
class Running:
    """The typical cost (`mean`: a median), Welford variance, an EWMA of recent values,
    and what was rejected.

    Until ROBUST_FIRST values are in, `mean` is their median (each value counted as the
    runs it stands for): the first execution on a device pays for moving the data
    there, and would otherwise weigh on the estimate for as long as there are few
    samples. After that it is the median of the last RECENT_VALUES values."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    recent: float = 0.0
    rejected: int = 0
    drift_streak: int = 0
    starts: int = 0  # start-overs (reset): the cost moved this many times
    first: list[float] = field(default_factory=list)
    lo: float = math.inf  # the best value seen: what the device did at its best
    # The last values as given (single runs, or the mean of an interval's runs).
    recent_values: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_VALUES))
    # The last values, rejected ones too: what a start-over rests on.
    last: deque[float] = field(default_factory=lambda: deque(maxlen=DRIFT_RUNS))

    @property
    def std(self) -> float:
        return math.sqrt(self.m2 / (self.n - 1)) if self.n > 1 else float("inf")

    @property
    def rel_err(self) -> float:
        """The relative standard error of the mean over the recent values, from their
        scaled MAD: one slow first run (it carried the data to the device) or a passing
        spike neither blows it up nor stays in it for good, as it would in the variance."""
        if self.mean <= 0:
            return 0.5
        k = len(self.recent_values)
        if k >= 3:
            med = statistics.median(self.recent_values)
            mad = statistics.median(abs(x - med) for x in self.recent_values)
            return 1.4826 * mad / self.mean / math.sqrt(k)
        if self.n > 1 and math.isfinite(self.std):
            return self.std / self.mean / math.sqrt(self.n)
        return 0.5

    def add(self, x: float, weight: int = 1) -> bool:
        """Add a value (the mean of `weight` executions); False when rejected as an outlier."""
        self.last.append(x)
        if self.n >= 5 and self.std > 0:
            off = abs(x - self.mean)
            if off > OUTLIER_SIGMAS * self.std and off > 0.5 * self.mean:
                self.rejected += 1
                # Many "outliers" in a row are not outliers: the cost moved.
                self.drift_streak += 1
                if self.drift_streak >= DRIFT_RUNS:
                    self.reset()
                    return True
                return False
        self.lo = min(self.lo, x)
        self.recent_values.append(x)
        for _ in range(max(1, min(weight, 50))):
            self._count(x)
            if len(self.first) < ROBUST_FIRST:
                self.first.append(x)
        # The median, not the running mean: a slow spell of a few runs (PoCL here: 30-47
        # ms for a 22 ms SpMV) held the running mean 20% up through the 16 runs after
        # it, and the task left the device for good; the evaluation's oracle, too, takes
        # the median of its runs.
        self.mean = statistics.median(self.first if self.n <= ROBUST_FIRST else self.recent_values)
        self.recent = x if self.n == 1 else EWMA_ALPHA * x + (1 - EWMA_ALPHA) * self.recent
        if self.n >= 8 and abs(self.recent - self.mean) > DRIFT_RATIO * self.mean:
            self.drift_streak += 1
            if self.drift_streak >= DRIFT_RUNS:
                self.reset()
        else:
            self.drift_streak = 0
        return True

    def outdone(self, x: float) -> bool:
        """X, from a look taken long after the others (exploration.RELOOK_GROWTH), is
        faster than their median by more than DRIFT_RATIO: they were another time of the
        node (a slow spell: PoCL's logistic map at 25 ms for 17 runs beside the monitor's
        start-up, 9 ms after). A slower late look goes through drift detection as ever."""
        return self.n > 0 and x < (1 - DRIFT_RATIO) * self.mean

    def start_over(self, x: float) -> None:
        """Keep only X, as one run whatever it stands for: what it says is measured
        again before any move (MOVE_MIN_SAMPLES), its spread with it."""
        self.last = deque([x], maxlen=DRIFT_RUNS)
        self.reset()

    def _count(self, x: float) -> None:
        """One more value in the count and the Welford sums."""
        self.n += 1
        d = x - self.mean
        self.mean += d / self.n
        self.m2 += d * (x - self.mean)

    def reset(self) -> None:
        """Start over from the last values (the cost moved): their median and spread.
        The best run stays: what the device did before may come back (a slow spell: PoCL
        here at 21.7 ms, then 24-42 ms for a few runs), and the advisor's optimistic
        bound, which rests on it, has a device that fell behind rechecked now and then
        (at most RECHECK_SAMPLES runs in all) instead of never again, as when the start
        over claimed three runs of one value with no spread and no better past."""
        values = list(self.last)
        self.n, self.mean, self.m2, self.drift_streak = 0, 0.0, 0.0, 0
        self.starts += 1
        for x in values:
            self._count(x)
        self.mean = statistics.median(values)
        self.first = values[:ROBUST_FIRST]
        self.recent = values[-1]
        self.lo = min(self.lo, *values)
        self.recent_values = deque(values, maxlen=RECENT_VALUES)


def fit_power_law(points: list[tuple[float, float, int]]) -> tuple[float, float, float] | None:
    """Least squares of t = a*n^b + c over b in a grid (a, c linear for fixed b)."""
    if len(points) < FIT_MIN_BUCKETS:
        return None
    best: tuple[float, tuple[float, float, float]] | None = None
    for i in range(0, 61):
        b = 0.3 + i * 0.05
        xs = [n**b for n, _, _ in points]
        ys = [t for _, t, _ in points]
        ws = [min(w, 20) for _, _, w in points]
        sw = sum(ws)
        mx = sum(w * x for w, x in zip(ws, xs, strict=True)) / sw
        my = sum(w * y for w, y in zip(ws, ys, strict=True)) / sw
        sxx = sum(w * (x - mx) ** 2 for w, x in zip(ws, xs, strict=True))
        if sxx <= 0:
            continue
        a = sum(w * (x - mx) * (y - my) for w, x, y in zip(ws, xs, ys, strict=True)) / sxx
        c = my - a * mx
        if a <= 0:
            continue
        # Relative error: costs span decades, absolute residuals would favour big inputs.
        err = sum(w * ((a * x + c - y) / y) ** 2 for w, x, y in zip(ws, xs, ys, strict=True))
        if best is None or err < best[0]:
            best = (err, (a, b, c))
    return None if best is None else best[1]


@dataclass
class TaskDeviceModel:
    task: str
    device: str
    time: dict[Context, Running] = field(default_factory=dict)
    energy: dict[Context, Running] = field(default_factory=dict)
    sizes: dict[Context, float] = field(default_factory=dict)  # mean input size seen per bucket
    _fit: dict[int, tuple[float, float, float] | None] = field(default_factory=dict)

    @property
    def samples(self) -> int:
        return sum(r.n for r in self.time.values())

    def observe(
        self,
        ctx: Context,
        time_s: float,
        count: int = 1,
        energy_j: float | None = None,
        size: int | None = None,
        retake: bool = False,
    ) -> bool:
        """Learn COUNT runs of mean TIME_S; RETAKE: a look long after the last, which
        starts the model over where it outdoes the runs before (Running.outdone)."""
        if size is not None:
            # The fit works on real sizes: a bucket's middle can be 40% off its inputs.
            n = self.time[ctx].n if ctx in self.time else 0
            prev = self.sizes.get(ctx, float(size))
            self.sizes[ctx] = (prev * n + size * count) / (n + count)
        self._fit.pop(ctx[1], None)
        time = self.time.setdefault(ctx, Running())
        if retake and time.outdone(time_s):
            time.start_over(time_s)
            # Energy goes with the time: the same runs, the same spell.
            if energy_j is None:
                self.energy.pop(ctx, None)
            else:
                self.energy.setdefault(ctx, Running()).start_over(energy_j)
            return True
        accepted = time.add(time_s, count)
        if accepted and energy_j is not None:
            self.energy.setdefault(ctx, Running()).add(energy_j, count)
        return accepted

    def fit(self, feature: int) -> tuple[float, float, float] | None:
        if feature not in self._fit:
            pts = [
                (self.sizes.get((s, f), bucket_size(s)), r.mean, r.n)
                for (s, f), r in self.time.items()
                if f == feature and r.n >= 1
            ]
            enough = sum(p[2] for p in pts) >= FIT_MIN_SAMPLES
            self._fit[feature] = fit_power_law(pts) if enough else None
        return self._fit[feature]

    def predict(self, ctx: Context, size: int | None = None) -> Prediction | None:
        r = self.time.get(ctx)
        e = self.energy.get(ctx)
        if r is not None and r.n >= MIN_BUCKET_SAMPLES:
            rel = r.rel_err
            energy = e.mean if e and e.n else None
            return Prediction(r.mean, energy, min(1.0, rel), r.n, "measured", r.lo)
        f = self.fit(ctx[1])
        if f is None:
            if r is not None and r.n == 1:  # one sample: a guess, said to be one
                return Prediction(r.mean, e.mean if e and e.n else None, 0.5, 1, "measured")
            return None
        a, b, c = f
        n = float(size) if size is not None else bucket_size(ctx[0])
        t = max(1e-9, a * n**b + c)
        # Energy scales with time at the device's average power over what was measured.
        watts = [
            er.mean / self.time[k].mean
            for k, er in self.energy.items()
            if k in self.time and self.time[k].mean > 0 and er.n
        ]
        energy = t * sum(watts) / len(watts) if watts else None
        return Prediction(t, energy, 0.25, self.samples, "fit")


def _finite(x: object, low: float = 0.0) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) and x >= low else None


def running_to_json(r: Running) -> dict[str, Any]:
    return {
        "n": r.n,
        "mean": r.mean,
        "m2": r.m2,
        "lo": r.lo if math.isfinite(r.lo) else None,
        "recent": list(r.recent_values)[-KEPT_RECENT:],
    }


def running_from_json(d: object) -> Running | None:
    """A kept Running as a prior (at most PRIOR_MAX_N runs' weight); None when D is not
    one (a hand-edited or damaged file): nothing of it is used."""
    if not isinstance(d, dict):
        return None
    n, mean, m2 = d.get("n"), _finite(d.get("mean")), _finite(d.get("m2"))
    recent = d.get("recent", [])
    if not isinstance(n, int) or n < 1 or mean is None or mean <= 0 or m2 is None:
        return None
    if not isinstance(recent, list) or len(recent) > RECENT_VALUES:
        return None
    values = [_finite(v) for v in recent]
    if any(v is None or v <= 0 for v in values):
        return None
    kept = min(n, PRIOR_MAX_N)
    r = Running(n=kept, mean=mean, m2=m2 * (kept - 1) / (n - 1) if n > 1 else 0.0)
    if n == 1:
        # One run (a probe of a device): known, but loosely (±35%), so that a device one
        # run showed far behind is not probed again at every start.
        r.n, r.m2 = MIN_BUCKET_SAMPLES, (0.5 * mean) ** 2
    r.first = [mean] * min(kept, ROBUST_FIRST)  # its median stays the prior's mean
    r.recent = values[-1] if values else mean  # type: ignore[assignment]
    r.recent_values.extend(v for v in values if v is not None)
    lo = _finite(d.get("lo"))
    r.lo = lo if lo is not None and lo > 0 else mean
    return r


def model_to_json(m: TaskDeviceModel) -> dict[str, Any]:
    return {
        "task": m.task,
        "device": m.device,
        "time": [[s, f, running_to_json(r), m.sizes.get((s, f))] for (s, f), r in m.time.items()],
        "energy": [[s, f, running_to_json(r)] for (s, f), r in m.energy.items()],
    }


def model_from_json(d: object) -> TaskDeviceModel | None:
    """A kept model, each of its inputs a prior; None when D is not one."""
    if not isinstance(d, dict):
        return None
    task, device = d.get("task"), d.get("device")
    if not isinstance(task, str) or not isinstance(device, str) or not task or not device:
        return None
    m = TaskDeviceModel(task, device)
    for what, into in (("time", m.time), ("energy", m.energy)):
        entries = d.get(what, [])
        if not isinstance(entries, list):
            return None
        for e in entries:
            if not isinstance(e, list) or len(e) < 3:
                return None
            s, f = e[0], e[1]
            if (
                not isinstance(s, int)
                or not isinstance(f, int)
                or not (0 <= s < 64 and 0 <= f < 64)
            ):
                return None
            r = running_from_json(e[2])
            if r is None:
                return None
            into[(s, f)] = r
            size = _finite(e[3]) if what == "time" and len(e) > 3 else None
            if size is not None and size > 0:
                m.sizes[(s, f)] = size
    return m if m.time else None
