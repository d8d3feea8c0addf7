"""The learner's cost model (placement/learner.py places with it): what one quantity of a
task (its time, or its energy) costs on one device, as a function of the input's size.

Per (task, device, quantity): a Bayesian linear regression of the log of a call's cost on log
size (the elasticity: how cost grows with size) plus radial bumps of log2(size) (the
knee where latency gives way to work), a Kalman filter whose weights drift a little
with every call of the task (what was learned ages, so a device not run for a while is
looked at again, as its uncertainty grows), a run-to-run noise learned from what the
weights' uncertainty does not explain, and a Page-Hinkley test on the standardised
residuals that widens the model when a device's cost moves (another job took it).
A size never seen is predicted from its neighbours, with an honest variance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

TIME, ENERGY = "t", "e"  # the quantities modelled, as the learner keys them

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
# The host's cores (the learner's first device) pay no launch: their cost grows with
# the work from the least size up, and a task learnt there at one size only is carried
# to others at this slope. At 0.5 a large class 10 octaves up read ~30x cheaper than it
# was and took calls an accelerator won; an accelerator's own stays 0.5, since at 1.0 a
# small warm run carried up kept its large calls off it (bench/README.md, the learner).
PRIOR_SLOPE_HOST = 1.0
PRIOR_SLOPE_SD = 0.7
PRIOR_SHAPE_SD = 0.5  # how far the knee bends the line (log; 1.0: 27.8% against 26.3%)
# Variance the weights gain each call of the task (ageing): a device left alone is
# looked at again. On seeds 0-199: 2e-4 gave 22.9% regret, 1e-3 25.7%, 1e-5 20.6%.
DRIFT_VAR = 1e-5
NOISE_PRIOR = 0.1**2  # run-to-run noise (log) before a device's own is known: 10%...
NOISE_PRIOR_CALLS = 3.0  # ... worth this many calls
NOISE_FLOOR = 0.01**2
# A call slower than predicted counts for this many sigmas at most: a cold run after
# the data left the device (PoCL's SpMV at 141 ms among 22s), a hiccup (a 0.13 ms SpMV
# read 2.07 ms). Only slower: a shared node's interference never makes a call faster,
# and a device seen to get faster is believed at once. Seeds 0-199 with 1% hiccups,
# regret (settle p95): unclipped 86.9% (146), 3 and PH_LAMBDA 8 38.2% (67), 2 and 12
# 38.1% (50), 3 and 12 39.0% (64); one-sided as two-sided (with floors: 30.6%).
Z_CLIP = 2.0
PH_DELTA = 0.5  # Page-Hinkley: residual mean (in sigmas) tolerated...
PH_LAMBDA = 12.0  # ... and the sum past it that says the cost moved (Z_CLIP's figures)
# ... and this share of the prior's variance comes back when it did: a spell ends, and
# what was known before it holds again.
RESET_SHARE = 0.05


@lru_cache(maxsize=4096)
def _features(octave: float) -> np.ndarray:
    bumps = np.exp(-0.5 * ((octave - CENTERS) / WIDTH) ** 2)
    return np.concatenate(([1.0, (octave - MID_OCTAVE) * math.log(2)], bumps))


def features(size: int) -> np.ndarray:
    return _features(round(math.log2(max(1, size)), 3))


def _prior_cov() -> np.ndarray:
    return np.diag([PRIOR_LEVEL_SD**2, PRIOR_SLOPE_SD**2] + [PRIOR_SHAPE_SD**2] * len(CENTERS))


PRIOR_COV = _prior_cov()


def _prior_mean(level: float, slope: float) -> np.ndarray:
    mean = np.zeros(2 + len(CENTERS))
    mean[0], mean[1] = level, slope
    return mean


@dataclass(frozen=True)
class Calm:
    """A model's state from before its cost rose (its arrays are never changed)."""

    mean: np.ndarray
    cov: np.ndarray
    noise_sum: float
    noise_n: float
    aged: int


class CostModel:
    """log cost ~ N(phi(size) . w, noise); w ~ N(mean, cov)."""

    def __init__(
        self, level: float = 0.0, mean: np.ndarray | None = None, slope: float = PRIOR_SLOPE_MEAN
    ) -> None:
        self.mean = _prior_mean(level, slope) if mean is None else mean.copy()
        self.cov = PRIOR_COV.copy()
        self.noise = NOISE_PRIOR
        self.noise_sum = NOISE_PRIOR * NOISE_PRIOR_CALLS
        self.noise_n = NOISE_PRIOR_CALLS
        self.n = 0
        self.aged = 0  # the task's call count when the model last aged
        self._ph_up = self._ph_down = 0.0
        # The state as a rise of cost began (the Page-Hinkley sum left 0), and the one
        # kept from before the first rise it confirmed: another job took the device, and
        # when it leaves, what was known before holds again (spell_looks.py).
        self._rise: Calm | None = None
        self.calm: Calm | None = None
        self.calm_since = 0  # the task's call count (aged) when the rise was confirmed

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
            zc = min(Z_CLIP, z)  # one slow outlier alone does not say it moved
            if self._ph_up == 0.0 and zc > PH_DELTA:  # arrays replaced, never changed
                self._rise = Calm(self.mean, self.cov, self.noise_sum, self.noise_n, self.aged)
            self._ph_up = max(0.0, self._ph_up + zc - PH_DELTA)
            self._ph_down = max(0.0, self._ph_down - zc - PH_DELTA)
            if max(self._ph_up, self._ph_down) > PH_LAMBDA:
                if self._ph_up > PH_LAMBDA:
                    if self.calm is None:  # the first rise's weights are the calm ones
                        self.calm, self.calm_since = self._rise, self.aged
                else:
                    self.calm = None  # seen to get faster: nothing to go back to
                # What was learned before the move counts for less: part of the prior's
                # uncertainty comes back, and the next calls place the new cost.
                self.cov = self.cov + RESET_SHARE * PRIOR_COV  # calm's stays as it was
                self._ph_up = self._ph_down = 0.0
                c_phi = self.cov @ phi
                var = float(phi @ c_phi)
                moved = True
        if not moved:
            # The noise is what the weights' own uncertainty leaves of the residual; one
            # call counts at most 3 sigmas of it, so a slow spell does not pass for noise.
            excess = min(residual * residual - var, 9.0 * self.noise)
            self.noise_sum += max(NOISE_FLOOR, excess)
            self.noise_n += 1.0
            self.noise = self.noise_sum / self.noise_n
        if not moved and z > Z_CLIP:  # one slow call moves the model Z_CLIP sigmas at most
            residual = Z_CLIP * math.sqrt(var + self.noise)
        gain = c_phi / (var + self.noise)
        self.mean = self.mean + gain * residual
        self.cov = self.cov - np.outer(gain, c_phi)
        self.n += 1
        return moved

    def predict_calm(self, size: int) -> float | None:
        """The mean log cost at SIZE before the cost rose; None when it did not."""
        return None if self.calm is None else float(features(size) @ self.calm.mean)

    def restore_calm(self) -> None:
        """The rise is over: back to the weights and noise from before it, aged since."""
        if (c := self.calm) is not None:
            self.mean, self.noise_sum, self.noise_n = c.mean, c.noise_sum, c.noise_n
            self.noise = self.noise_sum / self.noise_n
            self.cov = c.cov + np.eye(len(c.cov)) * (max(0, self.aged - c.aged) * DRIFT_VAR)
            self.calm = None
            self._ph_up = self._ph_down = 0.0

    def age(self, calls: int) -> None:
        """The task's calls since the model last aged: the weights drift DRIFT_VAR each."""
        if calls > self.aged:
            cov = self.cov.copy()  # a new array: a kept Calm shares the old one
            cov.flat[:: len(cov) + 1] += (calls - self.aged) * DRIFT_VAR
            self.cov = cov
            self.aged = calls
