"""The learner's tasks as a snapshot carries them: where
each runs, each device's predicted time and energy at the current input with the factor
that holds one sigma of it, the device of the least posterior mean and how likely it
gains, and per device the sizes measured with the prediction drawn over them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol

from adaptyst_top.placement.learner import Learner
from adaptyst_top.placement.prediction import Context, Prediction, pareto_front
from adaptyst_top.snapshot import Curve, TaskEntry


class _Task(Protocol):
    @property
    def current(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def context(self) -> Context: ...
    @property
    def size(self) -> int: ...
    @property
    def executions(self) -> int: ...


class _Measured(Protocol):
    def points(self) -> list[tuple[float, float]]: ...


class LearnedAdvisor(Protocol):
    """What the view reads of the learner's advisor (learned_advisor.py, which asks the
    view for its entries: typed here by what it offers, not imported)."""

    @property
    def tasks(self) -> Mapping[str, _Task]: ...
    @property
    def measured(self) -> Mapping[str, Mapping[str, _Measured]]: ...
    @property
    def devices(self) -> list[str]: ...
    @property
    def learner(self) -> Learner: ...
    def predictions(self, task: str) -> dict[str, Prediction]: ...
    def standing(
        self, task: str, preds: dict[str, Prediction] | None = None
    ) -> tuple[str, float | None, float | None]: ...
    def state(self, task: str, best: str, gain: float | None) -> str: ...


BAND_POINTS = 24  # sizes the prediction is drawn at, log-spaced over those measured


def learned_entries(adv: LearnedAdvisor) -> tuple[TaskEntry, ...]:
    out = []
    for name, st in adv.tasks.items():
        preds = adv.predictions(name)
        best, gain, confidence = adv.standing(name, preds)
        predicted = {d: _predicted(adv, st.key, d, st.size, p) for d, p in preds.items()}
        out.append(
            TaskEntry(
                task=name,
                device=st.current,
                executions=st.executions,
                input_bucket=st.context,
                predicted=predicted,
                pareto=tuple(pareto_front(preds)),
                best=best,
                gain=None if gain is None else round(gain, 4),
                confidence=None if confidence is None else round(confidence, 3),
                state=adv.state(name, best, gain),
                size=st.size,
                curves=_curves(adv, st.key),
            )
        )
    return tuple(out)


def _predicted(
    adv: LearnedAdvisor, key: str, device: str, size: int, p: Prediction
) -> dict[str, object]:
    est = adv.learner.estimate(key, device, size)
    return {
        "time_s": p.time_s,
        "energy_j": p.energy_j,
        "samples": p.samples,
        "source": p.source,
        "time_factor": None if est is None else round(est.time_factor, 4),
        "energy_factor": None
        if est is None or est.energy_factor is None
        else round(est.energy_factor, 4),
    }


def _curves(adv: LearnedAdvisor, key: str) -> tuple[Curve, ...]:
    measured = {d: m.points() for d, m in adv.measured.get(key, {}).items()}
    sizes = [n for points in measured.values() for n, _ in points if n > 0]
    if not sizes:
        return ()
    lo, hi = min(sizes) / 2, max(sizes) * 2
    grid = [lo * (hi / lo) ** (i / (BAND_POINTS - 1)) for i in range(BAND_POINTS)]
    out = []
    for d in adv.devices:
        if d not in measured:
            continue
        band = []
        for n in grid:
            est = adv.learner.estimate(key, d, max(1, round(n)))
            if est is not None and math.isfinite(est.time_s) and math.isfinite(est.time_factor):
                band.append((round(n, 1), est.time_s, round(est.time_factor, 4)))
        out.append(Curve(d, tuple(measured[d]), None, tuple(band)))
    return tuple(out)
