"""Placement that shares what it learned across input sizes from the first run, and
chooses by Thompson sampling (experiments/placement/placement_sim.py measures it against
the advisor and the classic policies on generated cases it was not tuned on).

Per task and device, a cost model (cost_model.py) of the call's time, and of its energy
when the objective counts energy; the objective is computed from them, so a weighted mix
is scored against the first device's predicted time and energy, as the advisor scores it
against the CPU's. A device not run yet starts from the shape the task showed on the
device it first ran on, at an unknown level (work grows with size the same way
everywhere; latency and throughput differ), and gets one look right after the task's
first call. Then each call goes to the device whose draw from the posterior is least: a
look happens only while a device might be the best, and is charged what it is predicted
to cost more.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from adaptyst_top.placement.cost_model import PRIOR_COV, PRIOR_SLOPE_MEAN, CostModel, features
from adaptyst_top.placement.objectives import Objective

# A look at a device predicted dearer than the best is charged what it is predicted
# to cost more, in calls of the best; looks stop while their charge is over this share
# of the task's calls (EXPLORE_FIRST calls' worth at least). It caps what wrong guesses
# at a new size cost (on seeds 0-199: no cap 26.3% regret, 0.2 25.6%, 0.05 24.6%).
EXPLORE_SHARE = 0.05
EXPLORE_FIRST = 20.0
TIME, ENERGY = "t", "e"


@dataclass(frozen=True)
class Estimate:
    """What the learner predicts of one call on one device: the median of its time (and
    energy, when learned) and the factor either way that holds one sigma of it."""

    time_s: float
    time_factor: float
    energy_j: float | None
    energy_factor: float | None


class Learner:
    """Where each call of a task runs, over DEVICES, by Thompson sampling."""

    def __init__(
        self,
        devices: list[str],
        objective: Objective = "time",
        weight: float = 0.5,
        seed: int = 0,
    ) -> None:
        self.devices = list(devices)
        self.objective: Objective = objective
        self.weight = weight  # the weighted objective's share of time
        self.quantities = (TIME,) if objective == "time" else (TIME, ENERGY)
        self.models: dict[tuple[str, str, str], CostModel] = {}
        self.first: dict[str, str] = {}  # task -> the device it first ran on
        self.rng = random.Random(seed)
        self.calls: dict[str, int] = {}
        self.spent: dict[str, float] = {}  # task -> its looks' predicted extra cost, in calls

    def ran_on(self, task: str, device: str) -> bool:
        return (task, device, TIME) in self.models

    def predict(
        self, task: str, device: str, size: int, q: str = TIME
    ) -> tuple[float, float] | None:
        """Mean and variance of the log of quantity Q (TIME, ENERGY) of TASK at SIZE on
        DEVICE; None when nothing tells. A device not run yet: the first device's shape,
        at a level known within the prior's."""
        m = self.models.get((task, device, q))
        if m is not None:
            m.age(self.calls.get(task, 0))
            return m.predict(size)
        ref = self.models.get((task, self.first.get(task, ""), q))
        if ref is None or self.ran_on(task, device):
            return None  # never learnt at all, or run without this quantity measured
        phi = features(size)
        return float(phi @ ref.mean), float(phi @ (ref.cov + PRIOR_COV) @ phi)

    def estimate(self, task: str, device: str, size: int) -> Estimate | None:
        """The predictions the advisor table and the reports show."""
        t = self.predict(task, device, size)
        if t is None:
            return None
        e = self.predict(task, device, size, ENERGY) if ENERGY in self.quantities else None
        return Estimate(
            math.exp(t[0]),
            math.exp(math.sqrt(t[1])),
            None if e is None else math.exp(e[0]),
            None if e is None else math.exp(math.sqrt(e[1])),
        )

    def _posteriors(self, task: str, size: int) -> dict[str, dict[str, tuple[float, float]]] | None:
        """Per device, the mean and variance of the log of each quantity; None before
        the task ran anywhere."""
        out: dict[str, dict[str, tuple[float, float]]] = {}
        for d in self.devices:
            out[d] = {}
            for q in self.quantities:
                if (p := self.predict(task, d, size, q)) is not None:
                    out[d][q] = p
            if TIME not in out[d]:
                return None
        return out

    def _draw(self, post: dict[str, dict[str, tuple[float, float]]]) -> dict[str, dict[str, float]]:
        return {
            d: {q: self.rng.gauss(mu, math.sqrt(var)) for q, (mu, var) in qs.items()}
            for d, qs in post.items()
        }

    def _scores(self, logs: dict[str, dict[str, float]]) -> dict[str, float]:
        """The log of each device's objective. Energy not measured on every device:
        placed by time."""
        if self.objective == "time" or any(ENERGY not in v for v in logs.values()):
            return {d: v[TIME] for d, v in logs.items()}
        if self.objective == "energy":
            return {d: v[ENERGY] for d, v in logs.items()}
        if self.objective == "edp":
            return {d: v[TIME] + v[ENERGY] for d, v in logs.items()}
        ref = logs.get(self.devices[0]) or next(iter(logs.values()))
        w = self.weight
        return {
            d: math.log(
                w * math.exp(v[TIME] - ref[TIME]) + (1 - w) * math.exp(v[ENERGY] - ref[ENERGY])
            )
            for d, v in logs.items()
        }

    def _first_look(self, task: str) -> str | None:
        """One look at each device right after the first call: a draw from the prior
        alone picks a device never run only half the time, while the calls that would
        have shown it the best go by."""
        if task not in self.first:
            return None
        return next((d for d in self.devices if not self.ran_on(task, d)), None)

    def choose(self, task: str, size: int) -> str:
        """The device whose posterior draw of its objective is least; a draw that picks
        a device predicted dearer than the best is a look, taken while the looks'
        predicted extra cost stays within EXPLORE_SHARE of the task's calls."""
        if (d := self._first_look(task)) is not None:
            return d
        post = self._posteriors(task, size)
        if post is None:
            return self.devices[0]  # nothing known: the first (the CPU) sets the level
        scores = self._scores(self._draw(post))
        mean_scores = self._scores({d: {q: p[0] for q, p in qs.items()} for d, qs in post.items()})
        best = min(scores, key=lambda d: scores[d])
        greedy = min(mean_scores, key=lambda d: mean_scores[d])
        extra = math.expm1(min(50.0, mean_scores[best] - mean_scores[greedy]))
        if extra <= 0.0:
            return best
        spent = self.spent.get(task, 0.0)
        if spent + extra > max(EXPLORE_FIRST, EXPLORE_SHARE * self.calls.get(task, 0)):
            return greedy
        self.spent[task] = spent + extra
        return best

    def place_round(
        self, task: str, sizes: list[int], ready_s: dict[str, float] | None = None
    ) -> list[str]:
        """Devices for calls of TASK submitted together (Dask's update_graph, a
        threaded application), before any of them is back: each device not run yet
        looks with the round's smallest call (the cheapest look); under the time
        objective the rest, the longest first, go where a posterior draw says they
        finish first (StarPU's dmda: the device's queue, READY_S seconds from now, plus
        the call's time), so a round still explores as single calls do; under the
        others, each where choose() puts it. Nothing known yet: the first device."""
        placed = [""] * len(sizes)
        ready = {d: (ready_s or {}).get(d, 0.0) for d in self.devices}
        order = sorted(range(len(sizes)), key=lambda i: sizes[i])
        if task in self.first:
            for d in self.devices:
                if not self.ran_on(task, d) and order:
                    i = order.pop(0)
                    placed[i] = d
                    ready[d] += self._time(task, d, sizes[i])
        for i in reversed(order):
            if self.objective != "time":
                placed[i] = self.choose(task, sizes[i])
                continue
            post = self._posteriors(task, sizes[i])
            if post is None:
                placed[i] = self.devices[0]
                continue
            drawn = self._draw(post)
            best = min(drawn, key=lambda d: ready[d] + math.exp(drawn[d][TIME]))
            placed[i] = best
            ready[best] += self._time(task, best, sizes[i])
        return placed

    def _time(self, task: str, device: str, size: int) -> float:
        p = self.predict(task, device, size)
        return math.exp(p[0]) if p is not None else 0.0

    def observe(
        self, task: str, device: str, size: int, time_s: float, energy_j: float | None = None
    ) -> bool:
        """A call's time and energy (None: not measured); True when the device's cost
        moved. A time that is no time teaches nothing."""
        if not (time_s > 0 and math.isfinite(time_s)):
            return False
        if task not in self.first:
            self.first[task] = device
        self.calls[task] = self.calls.get(task, 0) + 1
        moved = self._learn(task, device, TIME, size, time_s)
        measured = energy_j is not None and energy_j > 0 and math.isfinite(energy_j)
        if ENERGY in self.quantities and measured:
            moved = self._learn(task, device, ENERGY, size, energy_j) or moved  # type: ignore[arg-type]
        return moved

    def _learn(self, task: str, device: str, q: str, size: int, value: float) -> bool:
        y = math.log(value)
        m = self.models.get((task, device, q))
        if m is None:
            ref = self.models.get((task, self.first[task], q))
            if ref is None:
                m = CostModel(level=y - features(size)[1] * PRIOR_SLOPE_MEAN)
            else:
                m = CostModel(mean=ref.mean)
            self.models[(task, device, q)] = m
            m.aged = self.calls[task]
        m.age(self.calls[task])
        return m.observe(size, y)
