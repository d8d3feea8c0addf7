"""A cost model that shares what it learned across input sizes from the first run, and
chooses by Thompson sampling (experiments/placement/placement_sim.py measures it against the advisor
and the classic policies on generated cases it was not tuned on).

Per (task, device): a Bayesian linear regression of the log of a call's cost on radial
features of log2(size) (a bias plus bumps every 1.5 octaves), a Kalman filter whose
weights drift a little with every call of the task (what was learned ages, so a device
not run for a while is looked at again, as its uncertainty grows), and a Page-Hinkley
test on the standardised residuals that widens the model when a device's cost moves
(another job took it). A size never seen is predicted from its neighbours, with an
honest variance. Each call goes to the device whose draw from its predictive
distribution is least: an exploration happens only while a device might be the best,
and less often the more it would cost (its draw is of its cost).
"""

from __future__ import annotations

import math
import random

import numpy as np

# Octaves of input size the bumps are centred on (16 items to 2^33).
CENTERS = np.arange(4.0, 34.0, 1.5)
# Octaves: a bump's standard deviation (every 1.5 octaves a bump). Wide bumps carry
# what one size taught to its neighbours: on seeds 0-119, 1.5 gave 34.8% regret, 3.5
# 32.2% (28.6% with RESET_SHARE 0.05).
WIDTH = 3.5
PRIOR_LEVEL_SD = 3.0  # a device never run: within a factor e^3 (20x) of the first cost seen
# How far one size's cost may part from the level (natural log); chosen on seeds 0-119
# of experiments/placement/placement_sim.py (0.7: 36.3% regret, 1.0: 36.9%, 1.5: 37.9%; 0.7 settled
# shifts slower, p95 128 calls against 93): wider explores more at new sizes.
PRIOR_SHAPE_SD = 1.0
DRIFT_VAR = 2e-4  # variance the weights gain each call of the task (ageing)
NOISE_VAR = 0.05**2  # the prior on a device's run-to-run noise (log): 5%
NOISE_FLOOR = 0.01**2
PH_DELTA = 0.5  # Page-Hinkley: residual mean (in sigmas) tolerated...
PH_LAMBDA = 6.0  # ... and the sum past it that says the cost moved
# ... and this share of the prior's variance comes back when it did (0.25: 32.2%
# regret on seeds 0-119, 0.05: 28.6%, 1.0: 34.9%: a spell ends, and what was known
# before it holds again).
RESET_SHARE = 0.05


def features(size: int) -> np.ndarray:
    x = math.log2(max(1, size))
    bumps = np.exp(-0.5 * ((x - CENTERS) / WIDTH) ** 2)
    return np.concatenate(([1.0], bumps))


def _prior_cov() -> np.ndarray:
    return np.diag([PRIOR_LEVEL_SD**2] + [PRIOR_SHAPE_SD**2] * len(CENTERS))


class CostModel:
    """log cost ~ N(phi(size) . w, noise); w ~ N(mean, cov)."""

    def __init__(self, level: float = 0.0) -> None:
        self.mean = np.zeros(1 + len(CENTERS))
        self.mean[0] = level
        self.cov = _prior_cov()
        self.noise = NOISE_VAR
        self.n = 0
        self._ph_up = self._ph_down = 0.0

    def predict(self, size: int) -> tuple[float, float]:
        """Mean and variance of log cost at SIZE (the weights' uncertainty, noise aside)."""
        phi = features(size)
        return float(phi @ self.mean), float(phi @ self.cov @ phi)

    def observe(self, size: int, log_cost: float) -> bool:
        """Learn a call; True when the cost moved (Page-Hinkley) and the model widened."""
        phi = features(size)
        mu, var = float(phi @ self.mean), float(phi @ self.cov @ phi)
        residual = log_cost - mu
        z = residual / math.sqrt(var + self.noise)
        moved = False
        if self.n >= 3:
            self._ph_up = max(0.0, self._ph_up + z - PH_DELTA)
            self._ph_down = max(0.0, self._ph_down - z - PH_DELTA)
            if max(self._ph_up, self._ph_down) > PH_LAMBDA:
                # What was learned before the move counts for less: part of the prior's
                # uncertainty comes back, and the next calls place the new cost.
                self.cov += RESET_SHARE * _prior_cov()
                self._ph_up = self._ph_down = 0.0
                var = float(phi @ self.cov @ phi)
                moved = True
        gain = self.cov @ phi / (var + self.noise)
        self.mean = self.mean + gain * residual
        self.cov = self.cov - np.outer(gain, phi @ self.cov)
        self.n += 1
        if self.n > 2:  # the run-to-run noise, from what the model did not explain
            self.noise = max(NOISE_FLOOR, 0.95 * self.noise + 0.05 * residual * residual)
        return moved

    def age(self) -> None:
        self.cov[np.diag_indices_from(self.cov)] += DRIFT_VAR


class Learner:
    """Where each call of a task runs, over DEVICES, by Thompson sampling."""

    def __init__(self, devices: list[str], seed: int = 0) -> None:
        self.devices = list(devices)
        self.models: dict[tuple[str, str], CostModel] = {}
        self.rng = random.Random(seed)

    def choose(self, task: str, size: int) -> str:
        models = [self.models.get((task, d)) for d in self.devices]
        untried = [d for d, m in zip(self.devices, models, strict=True) if m is None]
        if len(untried) == len(self.devices):
            return self.devices[0]  # nothing known: the first (the CPU) sets the level
        best, best_draw = self.devices[0], math.inf
        for d, m in zip(self.devices, models, strict=True):
            if m is None:
                continue
            mu, var = m.predict(size)
            draw = self.rng.gauss(mu, math.sqrt(var))
            if draw < best_draw:
                best, best_draw = d, draw
        return best

    def observe(self, task: str, device: str, size: int, cost: float) -> bool:
        """A call's cost (time, energy, ... as the objective counts it); True when the
        device's cost moved."""
        if not (cost > 0 and math.isfinite(cost)):
            return False
        y = math.log(cost)
        if not any(t == task for t, _ in self.models):
            for d in self.devices:  # every device starts from the first cost seen
                self.models[(task, d)] = CostModel(level=y)
        for d in self.devices:
            self.models[(task, d)].age()
        return self.models[(task, device)].observe(size, y)
