"""What the advisor explores, and when: a bandit whose arms cost what they run for.

An exploration runs a task on a device that is not its current one, and a run there
may cost many runs here (GEMM on PoCL: 70x). So every exploration is charged, in runs
of the current device, against two things:

- a budget: the explorations of a task for one input may cost at most EXPLORE_SHARE
  of the runs it made so far, counted in runs of this input (a task that ran 10 times
  may spend one run's worth; one that ran 1,000 times, a hundred), so that learning
  costs about a tenth of the task's time, however short or long the run, and an
  input met for the first time (a shift) has a budget of its own;
- the gain it could bring: the optimistic estimate of the device (its confidence
  bound) against the current one, over a horizon of as many runs as the task has
  made (a task that ran N times is expected to run about N more).

Among the devices that pass, the one with the largest expected net gain is explored.
Its cost comes from the best prediction there is: this input's runs, the power law
fitted over sizes, or the ratio between the devices at the nearest inputs both ran
(a device 70x slower one size down is not explored again at full price). A device
nothing predicts is given one run: one run is enough to see a device far behind,
and a device that is close gets EXPLORE_RUNS more before any move.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from experiments.placement.baseline.model import Context, Prediction, TaskDeviceModel, bucket_size

EXPLORE_RUNS = 3  # a measuring exploration: enough for a median that drops the first run
PROBE_RUNS = 1  # the first look at a device nothing predicts, or one predicted far behind
EXPLORE_SHARE = 0.1  # explorations may cost this share of the task's runs so far
CLOSE_RATIO = 1.5  # predicted within this of the current: measured with EXPLORE_RUNS
# A single run carried the data there (seen here: 80 ms for a 25 ms SpMV on PoCL): the
# device may be 4x better, and is expected, until measured, at half that run.
FIRST_RUN_OPTIMISM = 0.25
# A ratio between devices measured this many buckets away may have moved by 2^(d/2).
RATIO_SPREAD_PER_BUCKET = 0.5
# A look of many runs can fall in one slow spell too (the monitor's start-up beside
# PoCL on 2 vCPUs: the logistic map at 25 ms for 17 runs, 9 ms otherwise): once the
# task has run this many times longer than when it last ran there, it widens with age
# as a short look does from twice (looked at again at most log4 of the task's runs).
RELOOK_GROWTH = 4


@dataclass(frozen=True)
class Option:
    device: str
    runs: int
    cost: float  # runs of the current device that the exploration costs, predicted
    gain: float  # fraction of the current cost per run it could save (optimistic)
    why: str

    def value(self, horizon: int) -> float:
        return self.gain * horizon - self.cost


def age(executions: int, looked_at: int) -> float:
    """How much wider a look of few runs at a device has grown since the task's
    LOOKED_AT-th run, now at its EXECUTIONS-th: 1 until the task's runs double, then
    1 + ln(runs since / runs before), as a UCB bound widens with the plays. One run can
    fall in a slow spell of the node (the monitor's bcc compile beside PoCL's two
    threads), and a device never looked at again is never seen to be faster. The 0.1
    floor keeps a device seen 10x behind from ever being looked at again."""
    if looked_at <= 0 or executions < 2 * looked_at:
        return 1.0
    return 1.0 + math.log(executions / looked_at - 1)


def widening(samples: int, executions: int, looked_at: int) -> float:
    """age() for a look of SAMPLES runs: a short look (a first run, one exploration)
    widens from when the task's runs have doubled, a longer one from RELOOK_GROWTH."""
    if samples > PROBE_RUNS + EXPLORE_RUNS + 1 and executions < RELOOK_GROWTH * looked_at:
        return 1.0
    return age(executions, looked_at)


def optimistic(p: Prediction, upload_s: float = 0.0, aged: float = 1.0) -> Prediction:
    """The device at its best plausible cost: two standard errors better, or its best
    run if better still (never below a tenth); one run alone, a quarter of it, or less
    when moving the input there (upload_s, at a pessimistic speed) could explain more
    of it: a first SpMV run of 45 million nonzeros is mostly the upload. AGED (age()):
    a measured look that much more optimistic (widening())."""
    if p.source == "measured" and p.samples <= 1:
        f = FIRST_RUN_OPTIMISM / aged
        if p.time_s > 0:
            f = min(f, 1 - upload_s / p.time_s)
    elif p.source == "ratio" and p.best_s is not None and p.time_s > 0:
        f = p.best_s / p.time_s  # the bound from_neighbours() set, however wide
        energy = None if p.energy_j is None else p.energy_j * f
        return replace(p, time_s=p.time_s * f, energy_j=energy)
    else:
        f = 1 - 2 * p.rel_err
        if p.source == "measured":
            # Its runs can all have fallen in one slow spell (the demo under CI: PoCL's
            # logistic map at 24 ms for four runs, 7 ms otherwise): taken again as the
            # task runs on (widening()).
            f /= aged
        if p.best_s is not None and p.time_s > 0:
            f = min(f, p.best_s / p.time_s)
    f = max(0.1, f)
    energy = None if p.energy_j is None else p.energy_j * f
    return replace(p, time_s=p.time_s * f, energy_j=energy)


def expected(p: Prediction, upload_s: float = 0.0) -> Prediction:
    """What an exploration of the device is expected to cost per run: the prediction,
    or where that is a guess (a run or two, one of which carried the data; a ratio
    from other inputs), the geometric middle between it and its optimistic bound."""
    if (p.source == "measured" and p.samples <= 2) or p.source == "ratio":
        f = (optimistic(p, upload_s).time_s / p.time_s) ** 0.5 if p.time_s > 0 else 1.0
        energy = None if p.energy_j is None else p.energy_j * f
        return replace(p, time_s=p.time_s * f, energy_j=energy)
    return p


def from_neighbours(
    device: TaskDeviceModel,
    current: TaskDeviceModel,
    ctx: Context,
    here: Prediction,
    size: float | None = None,
) -> Prediction | None:
    """The device's cost for this input as the current device's cost here times their
    ratio at the nearest input both ran (size and feature buckets apart, summed); the
    farther that input, the wider the bound (rel_err) around it. For a smaller input
    than that one, the bound also reaches the device's own best time there scaled down
    with the size: a ratio does not survive a shift to inputs where one device's launch
    cost dominates (an H200's CUDA at 1.4 ms whatever the size, 25x faster than the CPU
    at 1M items and 8x slower at 4,000)."""
    near: tuple[int, int, Context] | None = None
    for c, r in device.time.items():
        other = current.time.get(c)
        if r.n == 0 or other is None or other.n == 0 or other.mean <= 0:
            continue
        dist = abs(c[0] - ctx[0]) + abs(c[1] - ctx[1])
        key = (dist, -min(r.n, other.n), c)
        if near is None or key < near:
            near = key
    if near is None:
        return None
    dist, _, c = near
    # One run there may have carried the data: taken at its expected share, with a
    # bound much wider than its own.
    first = device.time[c].n <= 1
    ratio = device.time[c].mean / current.time[c].mean * (FIRST_RUN_OPTIMISM**0.5 if first else 1)
    energy = None
    de, ce = device.energy.get(c), current.energy.get(c)
    if here.energy_j is not None and de and ce and de.n and ce.n and ce.mean > 0:
        energy = here.energy_j * de.mean / ce.mean * (FIRST_RUN_OPTIMISM**0.5 if first else 1)
    # A single first run tells little about other inputs: its fixed costs (buffers, a
    # kernel built for a new size: 3 ms for a 0.03 ms SpMV on PoCL) do not scale.
    spread = 2 ** (RATIO_SPREAD_PER_BUCKET * dist) * (FIRST_RUN_OPTIMISM**-1.5 if first else 1)
    rel_err = (1 - 1 / spread) / 2
    time_s = here.time_s * ratio
    best_s = time_s / spread
    there = bucket_size(c[0])
    n = float(size) if size is not None else bucket_size(ctx[0])
    if n < there and math.isfinite(device.time[c].lo):
        best_s = min(best_s, device.time[c].lo * n / there)
    return Prediction(time_s, energy, rel_err, 0, "ratio", best_s=best_s)


def charged_runs(time_s: float, count: int, current_s: float, upload_s: float = 0.0) -> float:
    """Runs of the current device (current_s each) that COUNT runs elsewhere, TIME_S
    each, cost beyond what they replaced. UPLOAD_S: what moving the input there may have
    taken, on a device's first run of it; an investment a move keeps (the data stays
    there), not a loss of learning. Charged in full, the 50 ms first run of SpMV at
    60,000 rows on PoCL (7 ms after it, 11 ms on the CPU) spent the budget of the task's
    first 40 runs, and the runs that follow a promising first look came too late."""
    spent = max(0.0, time_s - upload_s / count)
    return count * max(0.0, spent / current_s - 1)


def budget(executions: int, spent: float) -> float:
    """Runs of the current device the task's next exploration may still cost."""
    return EXPLORE_SHARE * executions - spent


def choose(options: list[Option], executions: int, spent: float) -> Option | None:
    """The affordable option worth most over the horizon, if any is worth anything."""
    left = budget(executions, spent)
    fits = [o for o in options if o.cost <= left and o.value(executions) > 0]
    return max(fits, key=lambda o: o.value(executions), default=None)
