"""Which calls of a round are looks (learner.place_round asks): a look goes to a class of
inputs where the device has a real chance to win, not to the round's smallest call.

A round that mixes a small class the CPU wins and a large one an accelerator wins by
30x once looked with its smallest call only: the accelerator's floor said it could not
win there, so it was never looked at, and every large call stayed on the CPU (issue 75:
3.1x an oracle on held-out Dask work; experiments/placement/placement_classes: 9.9x).
Now each device looks, at most once a round, at the cheapest class (by octave of size)
where either it never ran and its floor leaves it room to win, or it never ran near
that size and the posterior gives it at least LOOK_P of winning there: the one look an
oracle that must learn pays per class and device. A device's first call (a context
built, a program compiled) is its cold one and is never learnt from (learner.observe);
a fresh device gets that call and a warm one of the class.
"""

from __future__ import annotations

import math
from typing import Protocol

from adaptyst_top.placement.cost_model import TIME
from adaptyst_top.placement.objectives import Objective

Posteriors = dict[str, dict[str, tuple[float, float]]]


def means_of(post: Posteriors) -> dict[str, dict[str, float]]:
    """Each device's posterior mean of each quantity (the log)."""
    return {d: {q: p[0] for q, p in qs.items()} for d, qs in post.items()}


class Learner(Protocol):
    """What of placement/learner.Learner the looks read (it imports this module)."""

    first: dict[str, str]
    warm: set[tuple[str, str]]
    failures: set[tuple[str, str]]
    looking: dict[tuple[str, str], int]
    octaves: dict[tuple[str, str], set[int]]
    floors: dict[str, float]
    objective: Objective

    def ran_on(self, task: str, device: str) -> bool: ...
    def _needs_look(self, task: str, device: str, size: int) -> bool: ...
    def _posteriors(self, task: str, size: int, pool: list[str]) -> Posteriors | None: ...
    def _scores(self, logs: dict[str, dict[str, float]]) -> dict[str, float]: ...


LOOK_P = 0.05  # a device's chance to win a class below which a call is not worth a look
NEAR_OCTAVES = 1  # a warm run within this many octaves of a size has told about it


def octave(size: int) -> int:
    return round(math.log2(max(1, size)))


def seen_near(learner: Learner, task: str, device: str, size: int) -> bool:
    seen = learner.octaves.get((task, device), set())
    o = octave(size)
    return any(abs(o - s) <= NEAR_OCTAVES for s in seen)


def p_wins(learner: Learner, task: str, device: str, size: int, pool: list[str]) -> float | None:
    """The posterior chance that DEVICE's objective at SIZE is below every other's in
    POOL (against the one of least mean; normal in the log). None before both are known."""
    post = learner._posteriors(task, size, pool)
    if not post or device not in post or len(post) < 2:
        return None
    means = learner._scores(means_of(post))
    variances = learner._scores({d: {q: p[1] for q, p in qs.items()} for d, qs in post.items()})
    best = min((d for d in post if d != device), key=lambda d: means[d])
    # The scores are sums of logs (time, energy, their product): so are the variances,
    # but for the weighted mix, whose variance this takes as time's.
    var = max(1e-12, variances[device] + variances[best])
    p = 0.5 * math.erfc((means[device] - means[best]) / math.sqrt(2 * var))
    floor = learner.floors.get(device)
    if floor is not None and learner.objective == "time":
        # No draw goes below the device's floor: it wins only where the best's time
        # lies above it too.
        mu, v = post[best][TIME]
        p *= 0.5 * math.erfc((floor - mu) / math.sqrt(2 * max(1e-12, v)))
    return p


def worth_a_look(learner: Learner, task: str, device: str, size: int, pool: list[str]) -> bool:
    if learner.looking.get((task, device)):
        return False  # a look is under way: its answer first
    needs = learner._needs_look(task, device, size)  # never run, or its joules unmeasured
    if needs or not learner.ran_on(task, device):
        return needs
    if seen_near(learner, task, device, size):
        return False
    # Not where the call would go anyway (the best by the means): a look is a call on a
    # device predicted dearer, with a real chance to be cheaper.
    p = p_wins(learner, task, device, size, pool)
    return p is not None and LOOK_P <= p < 0.5


def round_looks(learner: Learner, task: str, sizes: list[int], pool: list[str]) -> dict[int, str]:
    """The calls of a round (by index) that go to a device as its look, each device at
    most one class a round, the cheapest class first."""
    looks: dict[int, str] = {}
    free = sorted(range(len(sizes)), key=lambda i: sizes[i])
    classes = sorted({octave(n) for n in sizes})
    if task not in learner.first:
        # Nothing known anywhere: each device but the first looks at one call of every
        # class, the cheapest first (its cold run), while the first keeps a call.
        for d in pool[1:]:
            if learner.looking.get((task, d)) or (task, d) in learner.failures:
                continue
            for o in classes:
                members = [i for i in free if octave(sizes[i]) == o]
                if members and len(free) > 1:
                    looks[members[0]] = d
                    free.remove(members[0])
        return looks
    # Devices never run first: theirs is the look that tells most.
    for d in sorted(pool, key=lambda d: learner.ran_on(task, d)):
        for o in classes:
            members = [i for i in free if octave(sizes[i]) == o]
            if not members or not worth_a_look(learner, task, d, sizes[members[0]], pool):
                continue
            fresh = (task, d) not in learner.warm and (task, d) not in learner.failures
            for i in members[: 2 if fresh else 1]:  # a fresh device: its cold run, a warm one
                looks[i] = d
                free.remove(i)
            break
    return looks
