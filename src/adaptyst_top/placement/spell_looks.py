"""Looks back at a device another job slowed, once that job may have left (the learner
asks before its draws).

A device's cost that rises for a while (another job on it: placement_sim's slow
spells) is learnt as it rises (cost_model's Page-Hinkley test), and the calls leave for
another device. Nothing then shows when the other job has gone: the device is not run
again, its model ages by DRIFT_VAR alone, and the task stays on a device that is worse
once the spell is over. Here a device whose cost rose is looked at again where the
weights from before the rise say it would win, RELOOK_FIRST calls later, then after
twice as many each time it is still slow; two runs in a row that read closer to the
calm weights than to the slow ones put them back (one such run is looked at again at
once: a run's noise alone would otherwise flip a mild spell back and forth).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from adaptyst_top.placement.class_looks import Posteriors, means_of, octave
from adaptyst_top.placement.cost_model import TIME, CostModel

RELOOK_FIRST = 4  # the task's calls after the rise was confirmed to the first look back


class Learner(Protocol):
    """What of placement/learner.Learner the looks read (it imports this module)."""

    models: dict[tuple[str, str, str], CostModel]
    calls: dict[str, int]
    looking: dict[tuple[str, str], int]
    failures: set[tuple[str, str]]
    floors: dict[str, float]

    @property
    def quantities(self) -> tuple[str, ...]: ...

    def _posteriors(self, task: str, size: int, pool: list[str]) -> Posteriors | None: ...
    def _scores(self, logs: dict[str, dict[str, float]]) -> dict[str, float]: ...


@dataclass
class Backoff:
    since: int  # the model's calm_since: a later rise starts a new backoff
    due: int  # the task's call count from which a look back may go
    wait: int  # calls from a look back sent to the next
    calm_runs: int = 0  # runs in a row that read closer to the calm weights


class SpellLooks:
    def __init__(self) -> None:
        self.backoff: dict[tuple[str, str], Backoff] = {}

    def _backoff(self, task: str, device: str, m: CostModel) -> Backoff:
        b = self.backoff.get((task, device))
        if b is None or b.since != m.calm_since:
            b = Backoff(m.calm_since, m.calm_since + RELOOK_FIRST, RELOOK_FIRST)
            self.backoff[(task, device)] = b
        return b

    def due(
        self,
        learner: Learner,
        task: str,
        size: int,
        pool: list[str],
        candidates: list[str] | None = None,
    ) -> str | None:
        """A device of CANDIDATES (default POOL) due a look back for a call of SIZE, where
        its calm weights win in POOL; nothing changes until the look is sent."""
        calls = learner.calls.get(task, 0)
        for d in pool if candidates is None else candidates:
            m = learner.models.get((task, d, TIME))
            if m is None or m.calm is None or learner.looking.get((task, d)):
                continue
            if (task, d) in learner.failures:
                continue  # a call raised there: rounds look at most once until one is back
            if calls >= self._backoff(task, d, m).due and self._calm_wins(
                learner, task, d, size, pool
            ):
                return d
        return None

    def in_round(
        self, learner: Learner, task: str, sizes: list[int], pool: list[str], taken: set[int]
    ) -> dict[int, str]:
        """Calls of a round (by index, none of TAKEN) that look back: each device due one
        at most once, at the least call of a class (octave) where it would win."""
        slowed = [
            d for d in pool if (m := learner.models.get((task, d, TIME))) and m.calm is not None
        ]
        if not slowed:
            return {}  # most rounds: no device's cost rose
        firsts: dict[int, int] = {}
        for i in sorted(range(len(sizes)), key=sizes.__getitem__):
            firsts.setdefault(octave(sizes[i]), i)
        out: dict[int, str] = {}
        for i in firsts.values():
            left = [d for d in slowed if d not in out.values()]
            if i not in taken and (d := self.due(learner, task, sizes[i], pool, left)):
                out[i] = d
        return out

    def sent(self, learner: Learner, task: str, device: str) -> None:
        """A call went to DEVICE: a look back that was due waits twice as long for the
        next."""
        m = learner.models.get((task, device, TIME))
        if m is None or m.calm is None:
            return
        b = self._backoff(task, device, m)
        calls = learner.calls.get(task, 0)
        if calls >= b.due:
            b.due, b.wait = calls + 2 * b.wait, 2 * b.wait

    @staticmethod
    def _calm_wins(learner: Learner, task: str, device: str, size: int, pool: list[str]) -> bool:
        """Whether DEVICE's objective at SIZE is the least by the posterior means, its own
        from the calm weights: time at its floor at least; joules moved with the time
        where their own did not rise (the same power, a longer run)."""
        post = learner._posteriors(task, size, pool)
        m = learner.models.get((task, device, TIME))
        calm_t = m.predict_calm(size) if m is not None else None
        if not post or device not in post or len(post) < 2 or calm_t is None:
            return False
        means = means_of(post)
        own = means[device]
        fall = max(calm_t, learner.floors.get(device, -math.inf)) - own[TIME]
        for q in own:
            mq = learner.models.get((task, device, q))
            c = mq.predict_calm(size) if mq is not None and q != TIME else None
            own[q] = c if c is not None else own[q] + fall
        scores = learner._scores(means)
        return scores[device] < min(s for d, s in scores.items() if d != device)

    def seen(self, learner: Learner, task: str, device: str, size: int, log_time: float) -> None:
        """A run of DEVICE is back (before it is learnt): the second in a row closer to
        the calm weights than to the slow ones puts them back; the first is looked at
        again at once."""
        m = learner.models.get((task, device, TIME))
        calm = m.predict_calm(size) if m is not None else None
        if m is None or calm is None:
            return
        b = self._backoff(task, device, m)
        if abs(log_time - calm) >= abs(log_time - m.predict(size)[0]):
            b.calm_runs = 0
            return
        b.calm_runs += 1
        if b.calm_runs < 2:
            b.due = learner.calls.get(task, 0)  # the next call may look again
            return
        for q in learner.quantities:
            if (mq := learner.models.get((task, device, q))) is not None:
                mq.restore_calm()
        self.backoff.pop((task, device), None)
