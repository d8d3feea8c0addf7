"""Looks back at a device another job slowed, once that job may have left (the learner
asks before its draws).

A device's cost that rises for a while (another job on it: placement_sim's slow
spells) is learnt as it rises (cost_model's Page-Hinkley test), and the calls leave for
another device. Nothing then shows when the other job has gone: the device is not run
again, its model ages by DRIFT_VAR alone, and the task stays on a device that is worse
once the spell is over. Here a device whose cost rose is looked at again where the
weights from before the rise say it would win, RELOOK_FIRST calls later, then after
twice as many each time it is still slow; a look that reads closer to the calm weights
than to the slow ones puts them back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from adaptyst_top.placement.cost_model import TIME, CostModel

Posteriors = dict[str, dict[str, tuple[float, float]]]

RELOOK_FIRST = 4  # the task's calls after the rise was confirmed to the first look back


class Learner(Protocol):
    """What of placement/learner.Learner the looks read (it imports this module)."""

    models: dict[tuple[str, str, str], CostModel]
    calls: dict[str, int]
    looking: dict[tuple[str, str], int]

    @property
    def quantities(self) -> tuple[str, ...]: ...

    def _posteriors(self, task: str, size: int, pool: list[str]) -> Posteriors | None: ...
    def _scores(self, logs: dict[str, dict[str, float]]) -> dict[str, float]: ...


@dataclass
class Backoff:
    due: int  # the task's call count from which a look back may go
    wait: int  # calls to the next one after that


class SpellLooks:
    def __init__(self) -> None:
        self.backoff: dict[tuple[str, str], Backoff] = {}

    def due(self, learner: Learner, task: str, size: int, pool: list[str]) -> str | None:
        """A device to look back at for a call of SIZE, if one is due and would win."""
        calls = learner.calls.get(task, 0)
        for d in pool:
            m = learner.models.get((task, d, TIME))
            if m is None or m.calm is None or learner.looking.get((task, d)):
                continue
            first = m.calm_since + RELOOK_FIRST
            b = self.backoff.setdefault((task, d), Backoff(first, RELOOK_FIRST))
            if calls >= b.due and self._calm_wins(learner, task, d, size, pool):
                b.due, b.wait = calls + 2 * b.wait, 2 * b.wait
                return d
        return None

    @staticmethod
    def _calm_wins(learner: Learner, task: str, device: str, size: int, pool: list[str]) -> bool:
        post = learner._posteriors(task, size, pool)
        if not post or device not in post or len(post) < 2:
            return False
        means = {d: {q: p[0] for q, p in qs.items()} for d, qs in post.items()}
        for q in means[device]:
            m = learner.models.get((task, device, q))
            calm = m.predict_calm(size) if m is not None else None
            if calm is not None:
                means[device][q] = calm
        scores = learner._scores(means)
        return scores[device] < min(s for d, s in scores.items() if d != device)

    def seen(self, learner: Learner, task: str, device: str, size: int, log_time: float) -> None:
        """A run of DEVICE is back (before it is learnt): closer to the calm weights
        than to the slow ones, the spell is over and the calm weights come back."""
        m = learner.models.get((task, device, TIME))
        calm = m.predict_calm(size) if m is not None else None
        if m is None or calm is None:
            return
        slow = m.predict(size)[0]
        if abs(log_time - calm) < abs(log_time - slow) and math.isfinite(log_time):
            for q in learner.quantities:
                if (mq := learner.models.get((task, device, q))) is not None:
                    mq.restore_calm()
            self.backoff.pop((task, device), None)
