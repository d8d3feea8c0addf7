"""A cost model that shares what it learned across input sizes from the first run, and
chooses by Thompson sampling (experiments/placement/placement_sim.py measures it against the advisor
and the classic policies on generated cases it was not tuned on).

Per (task, device): a Bayesian linear regression of the log of a call's cost on log
size (the elasticity: how cost grows with size) plus radial bumps of log2(size) (the
knee where latency gives way to work), a Kalman filter whose weights drift a little
with every call of the task (what was learned ages, so a device not run for a while is
looked at again, as its uncertainty grows), a run-to-run noise learned from what the
weights' uncertainty does not explain, and a Page-Hinkley test on the standardised
residuals that widens the model when a device's cost moves (another job took it).

A device not run yet starts from the shape the task showed on the device it first ran
on, at an unknown level: work grows with size the same way everywhere, only latency and
throughput differ. A size never seen is predicted from its neighbours, with an honest
variance. Each call goes to the device whose draw from the posterior of its mean cost
is least: an exploration happens only while a device might be the best.
"""

from __future__ import annotations

import math
import random
from functools import lru_cache

import numpy as np

# Octaves of input size the bumps are centred on (16 items to 2^33).
CENTERS = np.arange(4.0, 34.0, 3.0)
MID_OCTAVE = 15.0  # the elasticity term is centred here, so the level is the mid-size cost
WIDTH = 3.0  # octaves: a bump's standard deviation; wide bumps carry a size to neighbours
PRIOR_LEVEL_SD = 3.0  # a device never run: within a factor e^3 (20x) of the first device
PRIOR_SLOPE_MEAN = 0.5  # cost ~ size^0.5 before anything is known: latency to work
# ... within size^-0.2 to size^1.9 (EDP of a work-bound kernel: 2). Every device's
# slope is this free, even after the first device's: accelerators are flatter (latency).
# Seeds 0-199 and 1000-1999: 0.2 for devices after the first, 19.1% -> 18.9% regret but
# settle p95 43 -> 58 calls.
PRIOR_SLOPE_SD = 0.7
PRIOR_SHAPE_SD = 0.5  # how far the knee bends the line (log; 1.0: 27.8% against 26.3%)
# Variance the weights gain each call of the task (ageing): a device left alone is
# looked at again. On seeds 0-199: 2e-4 gave 22.9% regret, 1e-3 25.7%, 1e-5 20.6%.
DRIFT_VAR = 1e-5
NOISE_PRIOR = 0.1**2  # run-to-run noise (log) before a device's own is known: 10%...
NOISE_PRIOR_CALLS = 3.0  # ... worth this many calls
NOISE_FLOOR = 0.01**2
PH_DELTA = 0.5  # Page-Hinkley: residual mean (in sigmas) tolerated...
PH_LAMBDA = 4.0  # ... and the sum past it that says the cost moved (6: settles later)
# ... and this share of the prior's variance comes back when it did: a spell ends, and
# what was known before it holds again.
RESET_SHARE = 0.05
# A look at a device predicted dearer than the best is charged what it is predicted
# to cost more, in calls of the best; looks stop while their charge is over this share
# of the task's calls (EXPLORE_FIRST calls' worth at least). It caps what wrong guesses
# at a new size cost (on seeds 0-199: no cap 26.3% regret, 0.2 25.6%, 0.05 24.6%).
EXPLORE_SHARE = 0.05
EXPLORE_FIRST = 20.0


@lru_cache(maxsize=4096)
def _features(octave: float) -> np.ndarray:
    bumps = np.exp(-0.5 * ((octave - CENTERS) / WIDTH) ** 2)
    return np.concatenate(([1.0, (octave - MID_OCTAVE) * math.log(2)], bumps))


def features(size: int) -> np.ndarray:
    return _features(round(math.log2(max(1, size)), 3))


def _prior_cov() -> np.ndarray:
    return np.diag([PRIOR_LEVEL_SD**2, PRIOR_SLOPE_SD**2] + [PRIOR_SHAPE_SD**2] * len(CENTERS))


PRIOR_COV = _prior_cov()


def _prior_mean(level: float) -> np.ndarray:
    mean = np.zeros(2 + len(CENTERS))
    mean[0], mean[1] = level, PRIOR_SLOPE_MEAN
    return mean


class CostModel:
    """log cost ~ N(phi(size) . w, noise); w ~ N(mean, cov)."""

    def __init__(self, level: float = 0.0, mean: np.ndarray | None = None) -> None:
        self.mean = _prior_mean(level) if mean is None else mean.copy()
        self.cov = PRIOR_COV.copy()
        self.noise = NOISE_PRIOR
        self._noise_sum = NOISE_PRIOR * NOISE_PRIOR_CALLS
        self._noise_n = NOISE_PRIOR_CALLS
        self.n = 0
        self._ph_up = self._ph_down = 0.0

    def predict(self, size: int) -> tuple[float, float]:
        """Mean and variance of log cost at SIZE (the weights' uncertainty, noise aside)."""
        phi = features(size)
        return float(phi @ self.mean), float(phi @ self.cov @ phi)

    def observe(self, size: int, log_cost: float) -> bool:
        """Learn a call; True when the cost moved (Page-Hinkley) and the model widened."""
        phi = features(size)
        c_phi = self.cov @ phi
        mu, var = float(phi @ self.mean), float(phi @ c_phi)
        residual = log_cost - mu
        z = residual / math.sqrt(var + self.noise)
        moved = False
        if self.n >= 3:
            self._ph_up = max(0.0, self._ph_up + z - PH_DELTA)
            self._ph_down = max(0.0, self._ph_down - z - PH_DELTA)
            if max(self._ph_up, self._ph_down) > PH_LAMBDA:
                # What was learned before the move counts for less: part of the prior's
                # uncertainty comes back, and the next calls place the new cost.
                self.cov += RESET_SHARE * PRIOR_COV
                self._ph_up = self._ph_down = 0.0
                c_phi = self.cov @ phi
                var = float(phi @ c_phi)
                moved = True
        if not moved:
            # The noise is what the weights' own uncertainty leaves of the residual; one
            # call counts at most 3 sigmas of it, so a slow spell does not pass for noise.
            excess = min(residual * residual - var, 9.0 * self.noise)
            self._noise_sum += max(NOISE_FLOOR, excess)
            self._noise_n += 1.0
            self.noise = self._noise_sum / self._noise_n
        gain = c_phi / (var + self.noise)
        self.mean = self.mean + gain * residual
        self.cov = self.cov - np.outer(gain, c_phi)
        self.n += 1
        return moved

    def age(self) -> None:
        self.cov[np.diag_indices_from(self.cov)] += DRIFT_VAR


class Learner:
    """Where each call of a task runs, over DEVICES, by Thompson sampling."""

    def __init__(self, devices: list[str], seed: int = 0) -> None:
        self.devices = list(devices)
        self.models: dict[tuple[str, str], CostModel] = {}
        self.first: dict[str, str] = {}  # task -> the device it first ran on
        self.rng = random.Random(seed)
        self.calls: dict[str, int] = {}
        self.spent: dict[str, float] = {}  # task -> its looks' predicted extra cost, in calls

    def predict(self, task: str, device: str, size: int) -> tuple[float, float] | None:
        """Mean and variance of log cost of TASK at SIZE on DEVICE; None before the task
        ran anywhere. A device not run yet: the first device's shape, at a level known
        within PRIOR_LEVEL_SD."""
        m = self.models.get((task, device))
        if m is not None:
            return m.predict(size)
        ref = self.models.get((task, self.first.get(task, "")))
        if ref is None:
            return None
        phi = features(size)
        return float(phi @ ref.mean), float(phi @ (ref.cov + PRIOR_COV) @ phi)

    def choose(self, task: str, size: int) -> str:
        """The device whose draw from the posterior of its mean log cost is least; a
        draw that picks a device predicted dearer than the best is a look, taken while
        the looks' predicted extra cost stays within EXPLORE_SHARE of the task's calls
        (EXPLORE_FIRST calls' worth at least)."""
        if task in self.first:  # one look at each device first: a Thompson draw from the
            # prior alone picks a device never run only half the time, as the calls
            # that would have shown it the best go by
            for d in self.devices:
                if (task, d) not in self.models:
                    return d
        best, best_draw, g_mu = self.devices[0], math.inf, math.inf
        for d in self.devices:
            p = self.predict(task, d, size)
            if p is None:
                return self.devices[0]  # nothing known: the first (the CPU) sets the level
            g_mu = min(g_mu, p[0])
            draw = self.rng.gauss(p[0], math.sqrt(p[1]))
            if draw < best_draw:
                best, best_draw, best_mu = d, draw, p[0]
        extra = math.expm1(min(50.0, best_mu - g_mu))  # in calls of the best's cost
        if extra <= 0.0:
            return best
        spent = self.spent.get(task, 0.0)
        if spent + extra > max(EXPLORE_FIRST, EXPLORE_SHARE * self.calls.get(task, 0)):
            return min(self.devices, key=lambda d: self.predict(task, d, size)[0])  # type: ignore[index]
        self.spent[task] = spent + extra
        return best

    def place_round(
        self, task: str, sizes: list[int], ready_s: dict[str, float] | None = None
    ) -> list[str]:
        """Devices for calls of TASK submitted together (Dask's update_graph, a
        threaded application), before any of them is back: each device not run yet
        looks with the round's smallest call (the cheapest look), then the rest, the
        longest first, go where they are predicted to finish first (StarPU's dmda:
        the device's queue, READY_S seconds from now, plus the call's predicted cost),
        by a draw from each device's posterior, so a round still explores as single
        calls do. Nothing known yet: the first device for the whole round."""
        placed = [""] * len(sizes)
        ready = {d: (ready_s or {}).get(d, 0.0) for d in self.devices}
        order = sorted(range(len(sizes)), key=lambda i: sizes[i])
        if task in self.first:
            for d in self.devices:
                if (task, d) not in self.models and order:
                    i = order.pop(0)
                    placed[i] = d
                    ready[d] += math.exp(self.predict(task, d, sizes[i])[0])  # type: ignore[index]
        for i in reversed(order):
            best, best_end = self.devices[0], math.inf
            for d in self.devices:
                p = self.predict(task, d, sizes[i])
                if p is None:
                    best = self.devices[0]
                    break
                end = ready[d] + math.exp(self.rng.gauss(p[0], math.sqrt(p[1])))
                if end < best_end:
                    best, best_end = d, end
            placed[i] = best
            p = self.predict(task, best, sizes[i])
            ready[best] += math.exp(p[0]) if p is not None else 0.0
        return placed

    def observe(self, task: str, device: str, size: int, cost: float) -> bool:
        """A call's cost (time, energy, ... as the objective counts it); True when the
        device's cost moved."""
        if not (cost > 0 and math.isfinite(cost)):
            return False
        y = math.log(cost)
        m = self.models.get((task, device))
        if m is None:
            ref = self.models.get((task, self.first.get(task, "")))
            if ref is None:
                self.first[task] = device
                m = CostModel(level=y - (features(size)[1] * PRIOR_SLOPE_MEAN))
            else:
                m = CostModel(mean=ref.mean)
            self.models[(task, device)] = m
        self.calls[task] = self.calls.get(task, 0) + 1
        for d in self.devices:
            if (other := self.models.get((task, d))) is not None:
                other.age()
        return m.observe(size, y)
