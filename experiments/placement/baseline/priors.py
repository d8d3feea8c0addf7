"""What the models kept from earlier runs say before a task has run here."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from experiments.placement.baseline.model import Prediction, TaskDeviceModel


def remembered(
    models: Sequence[TaskDeviceModel],
    score: Callable[[Prediction, Prediction], float],
    threshold: float,
    min_samples: int,
) -> str | None:
    """The device one task's MODELS measured best (lowest SCORE against a common
    reference) at every input they hold, by more than THRESHOLD at each; at an input
    only one device ran, that one (it stayed there). None when the best depends on the
    input or is too close to call: the task's first runs must then say which input it
    has. Only measurements of MIN_SAMPLES runs or more count."""
    winners: set[str] = set()
    for ctx in {ctx for m in models for ctx in m.time}:
        preds = {
            m.device: p
            for m in models
            if (p := m.predict(ctx)) is not None
            and p.source == "measured"
            and p.samples >= min_samples
        }
        if len(preds) < 2:
            winners.update(preds)
            continue
        ref = next(iter(preds.values()))
        ranked = sorted(preds, key=lambda d: score(preds[d], ref))
        best, second = (score(preds[d], ref) for d in ranked[:2])
        if second <= 0 or (second - best) / second <= threshold:
            return None
        winners.add(ranked[0])
    return winners.pop() if len(winners) == 1 else None
