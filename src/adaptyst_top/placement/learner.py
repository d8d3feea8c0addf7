"""Placement that shares what it learned across input sizes from the first run, and
chooses by Thompson sampling (experiments/placement/placement_sim.py measures it against
the advisor and the classic policies on generated cases it was not tuned on).

Per task and device, a cost model (cost_model.py) of the call's time, and of its energy
when the objective counts energy (or the monitor shows it); the objective is computed
from them, a weighted mix against the first device's time and energy. A device not run
yet starts from the shape the task showed on the device it first ran on, at an unknown
level (work grows with size the same way everywhere; latency and throughput differ),
and gets one look right after the task's first call; a device whose cost rose is looked
at again (spell_looks.py). Then each call goes to the device whose draw from the
posterior is least: a look happens only while a device might be the best, and is
charged what it is predicted to cost more.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection
from dataclasses import dataclass

from adaptyst_top.placement.class_looks import means_of, octave, round_looks
from adaptyst_top.placement.cost_model import (
    ENERGY,
    PRIOR_COV,
    PRIOR_LEVEL_SD,
    PRIOR_SLOPE_HOST,
    PRIOR_SLOPE_MEAN,
    TIME,
    CostModel,
    features,
)
from adaptyst_top.placement.objectives import Objective
from adaptyst_top.placement.spell_looks import SpellLooks

# A look at a device predicted dearer than the best is charged what it is predicted
# to cost more, in calls of the best; looks stop while their charge is over this share
# of the task's calls (EXPLORE_FIRST calls' worth at least). It caps what wrong guesses
# at a new size cost (on seeds 0-199: no cap 26.3% regret, 0.2 25.6%, 0.05 24.6%).
EXPLORE_SHARE = 0.05
EXPLORE_FIRST = 20.0
CONF_DRAWS = 64  # draws behind a shown probability: 1/64 steps, ~0.3 ms a task
ENERGY_FLOOR = "e_floor"  # in a posterior: the least its joules can be (log), where known
# What a call may take at most, and at least, to be learnt from (a day; a nanosecond):
# beyond, a report is no run of a task, and the logs stay where floats are exact.
MAX_S, MIN_S = 86_400.0, 1e-9


def exp(x: float) -> float:
    """e**X without overflow: a prediction far outside what was seen stays a float."""
    return math.exp(min(x, 700.0))


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
        floors_s: dict[str, float] | None = None,
        energy: bool = False,
    ) -> None:
        """ENERGY: learn joules under the time objective too (what the monitor shows)."""
        self.devices = list(devices)
        # Per device, the least a warm call takes there whatever its size (a launch, a
        # copy: what the device or its kind says, device_priors.KindPrior.min_run_s): no
        # prediction or draw of its time goes below it.
        self.floors = {d: math.log(f) for d, f in (floors_s or {}).items() if f > 0}
        self.objective: Objective = objective
        self.weight = weight  # the weighted objective's share of time
        self.quantities = (TIME, ENERGY) if objective != "time" or energy else (TIME,)
        self.models: dict[tuple[str, str, str], CostModel] = {}
        self.first: dict[str, str] = {}  # task -> the device it first ran on
        self.rng = random.Random(seed)
        self.shown_rng = random.Random(seed + 1)  # what is shown never moves the choices
        self.calls: dict[str, int] = {}
        self.warm: set[tuple[str, str]] = set()  # (task, device): its cold first run is done
        self.failures: set[tuple[str, str]] = set()  # (task, device): a call raised there
        self.looking: dict[tuple[str, str], int] = {}  # (task, device): its looks not back
        self.octaves: dict[tuple[str, str], set[int]] = {}  # (task, device): sizes run warm
        self._memo: dict[tuple[str, str, int, int], float] = {}  # predicted_s's
        # (task, device) -> (its runs without joules, the task's calls at the last one)
        self.unmeasured: dict[tuple[str, str], tuple[int, int]] = {}
        self.spent: dict[str, float] = {}  # task -> its looks' predicted extra cost, in calls
        self.spells = SpellLooks()  # devices whose cost rose: looked at again

    def failed(self, task: str, device: str) -> None:
        """A call of TASK raised on DEVICE: nothing to learn, and no more than one look
        a round there until a run comes back."""
        self.failures.add((task, device))
        self.back(task, device)

    def back(self, task: str, device: str) -> None:
        """A call placed on DEVICE is back, or will never be (cancelled)."""
        if (n := self.looking.pop((task, device), 0)) > 1:
            self.looking[(task, device)] = n - 1

    def _look(self, task: str, device: str) -> str:
        self.looking[(task, device)] = self.looking.get((task, device), 0) + 1
        self.spells.sent(self, task, device)
        return device

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
        mean = float(phi @ ref.mean) + phi[1] * self._slope_shift(task, device)
        return mean, float(phi @ (ref.cov + PRIOR_COV) @ phi)

    def _slope(self, device: str) -> float:
        """The prior elasticity of DEVICE: the host's (the first device) the work's."""
        return PRIOR_SLOPE_HOST if device == self.devices[0] else PRIOR_SLOPE_MEAN

    def _slope_shift(self, task: str, device: str) -> float:
        """What DEVICE adds to the slope learnt on the device TASK first ran on, as it
        starts from those weights: what that device showed beyond its own prior slope,
        on DEVICE's prior."""
        return self._slope(device) - self._slope(self.first.get(task, device))

    def estimate(self, task: str, device: str, size: int) -> Estimate | None:
        """The predictions the advisor table and the reports show."""
        t = self.predict(task, device, size)
        if t is None:
            return None
        e = self.predict(task, device, size, ENERGY) if ENERGY in self.quantities else None
        return Estimate(
            exp(t[0]),
            exp(math.sqrt(t[1])),
            None if e is None else exp(e[0]),
            None if e is None else exp(math.sqrt(e[1])),
        )

    def _pool(self, among: Collection[str] | None) -> list[str]:
        """The devices a call may go to: AMONG (those not left out), else all."""
        return [d for d in self.devices if among is None or d in among] or self.devices

    def _posteriors(
        self, task: str, size: int, pool: list[str]
    ) -> dict[str, dict[str, tuple[float, float]]] | None:
        """Per device, the mean and variance of the log of each quantity; None before
        the task ran anywhere."""
        out: dict[str, dict[str, tuple[float, float]]] = {}
        for d in pool:
            out[d] = {}
            for q in self.quantities:
                if (p := self.predict(task, d, size, q)) is not None:
                    out[d][q] = p
            if d in self.floors and TIME in out[d]:
                mu, var = out[d][TIME]
                raised = max(0.0, self.floors[d] - mu)
                out[d][TIME] = (mu + raised, var)
                if ENERGY in out[d] and (task, d, ENERGY) not in self.models:
                    # Its joules known only from the first device's: at that power, a
                    # run at least as long as the floor, and no draw below it.
                    mu_e, var_e = out[d][ENERGY]
                    out[d][ENERGY] = (mu_e + raised, var_e)
                    out[d][ENERGY_FLOOR] = (mu_e + self.floors[d] - mu, 0.0)
            if TIME not in out[d]:
                return None
        if ENERGY in self.quantities:
            self._energy_where_unmeasured(out)
        return out

    @staticmethod
    def _energy_where_unmeasured(out: dict[str, dict[str, tuple[float, float]]]) -> None:
        """A device whose runs came back without joules (a meter's first window):
        its time at the power of a device measured, within the prior's factor, so that
        it is looked at again rather than judged by time alone."""
        donor = next((v for v in out.values() if ENERGY in v), None)
        if donor is None:
            return  # energy measured nowhere: placed by time
        watts = donor[ENERGY][0] - donor[TIME][0]
        for v in out.values():
            if ENERGY not in v:
                mu, var = v[TIME]
                v[ENERGY] = (mu + watts, var + PRIOR_LEVEL_SD**2)

    def _draw(
        self, post: dict[str, dict[str, tuple[float, float]]], rng: random.Random | None = None
    ) -> dict[str, dict[str, float]]:
        gauss = (rng or self.rng).gauss
        drawn = {
            d: {q: gauss(mu, math.sqrt(var)) for q, (mu, var) in qs.items()}
            for d, qs in post.items()
        }
        for d, floor in self.floors.items():
            if d in drawn and TIME in drawn[d]:
                drawn[d][TIME] = max(drawn[d][TIME], floor)
            if d in drawn and ENERGY_FLOOR in drawn[d]:
                drawn[d][ENERGY] = max(drawn[d][ENERGY], drawn[d][ENERGY_FLOOR])
        return drawn

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
            d: math.log(w * exp(v[TIME] - ref[TIME]) + (1 - w) * exp(v[ENERGY] - ref[ENERGY]))
            for d, v in logs.items()
        }

    def _first_look(self, task: str, size: int, pool: list[str]) -> str | None:
        """A look at each device right after the first call, until a warm run there
        is learnt: a draw from the prior alone picks a device never run only half the
        time, while the calls that would have shown it the best go by."""
        if task not in self.first:
            return None
        return next((d for d in pool if self._needs_look(task, d, size)), None)

    def _needs_look(self, task: str, device: str, size: int) -> bool:
        """Not run warm yet (and room to win there); or, under an objective of joules,
        run without them (a meter's first window), looked at again after 1, 2, 4...
        calls, so a device whose joules never come costs ever less."""
        if self.looking.get((task, device)):
            return False  # a look is under way: its answer first
        if not self.ran_on(task, device):
            return self._may_win(task, device, size)
        if self.objective == "time" or (task, device, ENERGY) in self.models:
            return False  # joules not counted, or measured
        unmeasured, at = self.unmeasured.get((task, device), (0, 0))
        return bool(self.calls.get(task, 0) - at >= 1 << min(unmeasured, 16))

    def _may_win(self, task: str, device: str, size: int) -> bool:
        """Whether DEVICE's floor leaves it room to be faster than the first device."""
        ref = self.predict(task, self.first.get(task, ""), size)
        return device not in self.floors or ref is None or self.floors[device] < ref[0]

    def choose(self, task: str, size: int, among: Collection[str] | None = None) -> str:
        """The device whose posterior draw of its objective is least; a draw that picks
        a device predicted dearer than the best is a look, taken while the looks'
        predicted extra cost stays within EXPLORE_SHARE of the task's calls."""
        pool = self._pool(among)
        if (d := self._first_look(task, size, pool)) is not None:
            return self._look(task, d)
        if (d := self.spells.due(self, task, size, pool)) is not None:
            return self._look(task, d)
        drawn = self.sample(task, size, pool)
        if drawn is None:
            return pool[0]  # nothing known: the first (the CPU) sets the level
        pick, greedy, extra = drawn
        return pick if extra <= 0.0 or self.charge(task, extra) else greedy

    def first_look(self, task: str, size: int, among: Collection[str] | None = None) -> str | None:
        """The device a look must go to before any draw (_first_look), if any; a look
        sent is told with look_sent."""
        return self._first_look(task, size, self._pool(among))

    def spell_look(self, task: str, size: int, others: list[str]) -> str | None:
        """One of OTHERS whose cost rose, due a look back (spell_looks); look_sent."""
        return self.spells.due(self, task, size, self.devices, others)

    def look_sent(self, task: str, device: str) -> None:
        self._look(task, device)

    def sample(self, task: str, size: int, pool: list[str]) -> tuple[str, str, float] | None:
        """(the device of a posterior draw, the device of the posterior means, what the
        draw's device is predicted to cost more, in calls of the other); None before the
        task ran anywhere."""
        post = self._posteriors(task, size, pool)
        if not post:
            return None
        scores = self._scores(self._draw(post))
        mean_scores = self._scores(means_of(post))
        pick = min(scores, key=lambda d: scores[d])
        greedy = min(mean_scores, key=lambda d: mean_scores[d])
        return pick, greedy, math.expm1(min(50.0, mean_scores[pick] - mean_scores[greedy]))

    def charge(self, task: str, extra: float, commit: bool = True) -> bool:
        """Whether the task's looks stay within their share with one more of EXTRA calls'
        worth; charged when COMMIT."""
        spent = self.spent.get(task, 0.0)
        if spent + extra > max(EXPLORE_FIRST, EXPLORE_SHARE * self.calls.get(task, 0)):
            return False
        if commit:
            self.spent[task] = spent + extra
        return True

    def p_better(self, task: str, size: int, a: str, b: str) -> float | None:
        """The posterior probability that A's objective is less than B's (CONF_DRAWS
        draws: any objective, the floors included); None before both ran."""
        post = self._posteriors(task, size, [a, b])
        if not post or a not in post or b not in post:
            return None
        wins = 0
        for _ in range(CONF_DRAWS):
            scores = self._scores(self._draw(post, self.shown_rng))
            wins += scores[a] < scores[b]
        return wins / CONF_DRAWS

    def best(self, task: str, size: int, among: Collection[str] | None = None) -> str | None:
        """Where TASK at SIZE runs once the looks are done: the least posterior mean of
        the objective (None before the task ran anywhere)."""
        post = self._posteriors(task, size, self._pool(among))
        if post is None:
            return None
        means = self._scores(means_of(post))
        return min(means, key=lambda d: means[d])

    def place_round(
        self,
        task: str,
        sizes: list[int],
        ready_s: dict[str, float] | None = None,
        among: Collection[str] | None = None,
        looks: list[bool] | None = None,
    ) -> list[str]:
        """Devices for calls of TASK submitted together (Dask's update_graph, a
        threaded application), before any of them is back: each device looks where
        it may win a class it has not run near (class_looks); under the time
        objective the rest, the longest first, go where a posterior draw says they
        finish first (StarPU's dmda: the device's queue, READY_S seconds from now, plus
        the call's time), so a round still explores as single calls do; under the
        others, each where choose() puts it. Nothing known yet: the first device.
        LOOKS, when given, is filled with whether each call is a look."""
        placed = [""] * len(sizes)
        pool = self._pool(among)
        ready = {d: (ready_s or {}).get(d, 0.0) for d in pool}
        looked = round_looks(self, task, sizes, pool)
        for d in looked.values():
            self._look(task, d)
        for i, d in self.spells.in_round(self, task, sizes, pool, set(looked)).items():
            looked[i] = self._look(task, d)  # a device another job slowed, again
        for i, d in looked.items():
            placed[i] = d
            ready[d] += self._time(task, d, sizes[i])
        order = sorted((i for i in range(len(sizes)) if i not in looked), key=lambda i: sizes[i])
        # A device not run yet gets its looks, never more calls on its prior alone.
        known = [d for d in pool if self.ran_on(task, d)] or pool
        posts: dict[int, dict[str, dict[str, tuple[float, float]]] | None] = {}
        for i in reversed(order):
            if self.objective != "time":
                placed[i] = self.choose(task, sizes[i], known)
                continue
            if sizes[i] not in posts:  # a round's calls are mostly of a few sizes
                posts[sizes[i]] = self._posteriors(task, sizes[i], known)
            post = posts[sizes[i]]
            if post is None:
                placed[i] = known[0]
                continue
            drawn = self._draw(post)
            best = min(drawn, key=lambda d: ready[d] + exp(drawn[d][TIME]))
            placed[i] = best
            ready[best] += exp(post[best][TIME][0])
        if looks is not None:
            looks[:] = [i in looked for i in range(len(sizes))]
        return placed

    def predicted_s(self, task: str, device: str, size: int) -> float:
        """A call's predicted time, an hour at most (0 when nothing tells), memoised:
        the Dask plugin asks it of every call of a round."""
        key = (task, device, size, self.calls.get(task, 0))
        if (t := self._memo.get(key)) is None:
            if len(self._memo) >= 1024:  # what was learnt since makes them stale anyway
                self._memo.clear()
            t = self._memo[key] = min(3600.0, self._time(task, device, size))
        return t

    def _time(self, task: str, device: str, size: int) -> float:
        p = self.predict(task, device, size)
        return exp(p[0]) if p is not None else 0.0

    def observe(
        self,
        task: str,
        device: str,
        size: int,
        time_s: float,
        energy_j: float | None = None,
        count: int = 1,
    ) -> bool:
        """A call's time and energy (None: not measured), or the typical one of COUNT
        calls (a monitor's interval: one observation, of mostly warm calls); True when
        the device's cost moved. A time that is no time teaches nothing."""
        self.back(task, device)
        self.failures.discard((task, device))
        if not (MIN_S <= time_s <= MAX_S) or count < 1:  # NaN fails both
            return False
        self.first.setdefault(task, device)
        # Observations, not calls: what was learnt ages by what was seen since.
        self.calls[task] = self.calls.get(task, 0) + 1
        if (task, device) not in self.warm:
            # A device's first run of a task pays for what later ones find done (a
            # kernel compiled, a context made, pages mapped: PoCL's first SpMV took
            # 141 ms, then 22): it teaches nothing, and the next call looks again.
            # Several calls' typical time (their median) is mostly warm ones'.
            self.warm.add((task, device))
            if count == 1:
                return False
        self.octaves.setdefault((task, device), set()).add(octave(size))
        self.spells.seen(self, task, device, size, math.log(time_s))
        moved = self._learn(task, device, TIME, size, time_s)
        measured = energy_j is not None and 1e-12 <= energy_j <= 1e12
        if ENERGY in self.quantities and not measured:
            n, _ = self.unmeasured.get((task, device), (0, 0))
            self.unmeasured[(task, device)] = (n + 1, self.calls[task])
        if ENERGY in self.quantities and measured:
            moved = self._learn(task, device, ENERGY, size, energy_j) or moved  # type: ignore[arg-type]
        return moved

    def _learn(self, task: str, device: str, q: str, size: int, value: float) -> bool:
        y = math.log(value)
        m = self.models.get((task, device, q))
        if m is None:
            ref = self.models.get((task, self.first[task], q))
            if ref is None:
                slope = self._slope(device)
                m = CostModel(level=y - features(size)[1] * slope, slope=slope)
            else:
                m = CostModel(mean=ref.mean)  # a copy of the first device's weights
                m.mean[1] += self._slope_shift(task, device)
            self.models[(task, device, q)] = m
            m.aged = self.calls[task]
        m.age(self.calls[task])
        return m.observe(size, y)
