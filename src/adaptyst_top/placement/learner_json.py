"""The learner's models kept between runs of an application, as JSON (the advisor's
are kept by runtime/model_store.py; this is the learner's codec for the same): what
each task taught about each device, and which device it first ran on. A kept model is
what was learnt, not what happened: the next run starts cold on every device, and what
was learnt ages from there. Anything not exactly what this writes is refused whole,
with the reason in one line."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from adaptyst_top.placement.cost_model import (
    ENERGY,
    NOISE_FLOOR,
    PRIOR_COV,
    PRIOR_SLOPE_HOST,
    PRIOR_SLOPE_MEAN,
    TIME,
    CostModel,
    features,
)
from adaptyst_top.placement.learner import MAX_S, MIN_S, Learner

VERSION = 1
MAX_MODELS = 4096  # what a kept file may hold: a few hundred tasks on a few devices
MAX_NAME = 256
DIM = PRIOR_COV.shape[0]
# The level is the mid-size cost: from a call at the least or the greatest size, that
# call's cost carried along the steeper prior slope (~34 in log from 2^64 items).
_CARRIED = max(PRIOR_SLOPE_HOST, PRIOR_SLOPE_MEAN) * max(
    abs(features(1)[1]), abs(features(2**64)[1])
)
LEVEL_LO = math.log(MIN_S) - 10.0 - _CARRIED
LEVEL_HI = math.log(MAX_S) + 10.0 + _CARRIED
MAX_WEIGHT = 50.0  # a slope or bump, in log cost per unit: 50 is e^50 over an octave
MAX_VAR_OF_PRIOR = 10.0  # ageing adds 1e-5 a call: ~100,000 calls unseen at most
MAX_NOISE = 9.0  # a run-to-run sigma of e^3 (20x)


def learner_to_json(learner: Learner, tasks: set[str] | None = None) -> dict[str, Any]:
    """LEARNER's models (of TASKS only, when given)."""
    return {
        "version": VERSION,
        "first": {t: d for t, d in learner.first.items() if tasks is None or t in tasks},
        "models": [
            {
                "task": task,
                "device": device,
                "q": q,
                "mean": m.mean.tolist(),
                "cov": m.cov.tolist(),
                "noise": [m.noise_sum, m.noise_n],
                "n": m.n,
            }
            for (task, device, q), m in learner.models.items()
            if tasks is None or task in tasks
        ],
    }


def learner_from_json(d: object, learner: Learner) -> str | None:
    """Give LEARNER the kept models of D (the devices it does not have left out);
    None when taken, else why nothing was."""
    if not isinstance(d, dict) or d.get("version") != VERSION:
        return f"not the learner's kept models (version {VERSION})"
    first, entries = d.get("first"), d.get("models")
    if not isinstance(first, dict) or not isinstance(entries, list) or len(entries) > MAX_MODELS:
        return "kept models: no 'first' map or no 'models' list, or too many"
    if not all(_name(k) and _name(v) for k, v in first.items()):
        return "kept models: a task or device name that is not one"
    models: dict[tuple[str, str, str], CostModel] = {}
    for e in entries:
        m = _model(e)
        if m is None:
            return "kept models: a damaged model"
        models[(e["task"], e["device"], e["q"])] = m
    for (task, device, q), m in models.items():
        if device in learner.devices and q in learner.quantities:
            learner.models[(task, device, q)] = m
            if task in first and first[task] in learner.devices:
                learner.first.setdefault(task, first[task])
    return None


def _name(v: object) -> bool:
    return isinstance(v, str) and 0 < len(v) <= MAX_NAME


def _model(e: object) -> CostModel | None:
    if not isinstance(e, dict) or not all(_name(e.get(k)) for k in ("task", "device")):
        return None
    if e.get("q") not in (TIME, ENERGY):
        return None
    try:
        mean = np.array(e["mean"], dtype=float)
        cov = np.array(e["cov"], dtype=float)
        noise = e["noise"]
        if type(noise) is not list or len(noise) != 2:
            return None
        noise_sum, noise_n = (float(x) for x in noise)
        n = e["n"]
    except (KeyError, TypeError, ValueError, ArithmeticError):  # 1e400 in JSON: Overflow
        return None
    if mean.shape != (DIM,) or cov.shape != (DIM, DIM) or type(n) is not int or n < 0:
        return None
    if not (np.isfinite(mean).all() and np.isfinite(cov).all()):
        return None
    # Within what the learner itself can reach: a level between MIN_S's and MAX_S's
    # logs carried to mid-size (and a margin), no weight or variance past a few of the
    # prior's.
    if not LEVEL_LO <= mean[0] <= LEVEL_HI or np.abs(mean[1:]).max() > MAX_WEIGHT:
        return None
    if not np.allclose(cov, cov.T) or np.diag(cov).max() > MAX_VAR_OF_PRIOR * PRIOR_COV.max():
        return None
    if not (math.isfinite(noise_sum) and 1 <= noise_n <= 1e9):
        return None
    if not NOISE_FLOOR <= noise_sum / noise_n <= MAX_NOISE:
        return None
    try:  # a covariance: symmetric, positive definite
        np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        return None
    m = CostModel(mean=mean)
    m.cov = cov
    m.noise_sum, m.noise_n = noise_sum, noise_n
    m.noise = noise_sum / noise_n
    m.n = n
    return m
