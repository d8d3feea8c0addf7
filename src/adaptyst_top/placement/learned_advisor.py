"""The learner (learner.py) as the monitor's advisor. An application asks the task API
where each task runs, and the monitor sees its runs an interval at a time: each
interval's typical time of a task on a device is one observation, and once an interval
the task is moved where the posterior means put it, or sent for a few runs (a look)
where a posterior draw does, within the learner's budget of looks. The learner's task is
the task's name and input feature bucket (a sparser matrix is another task); its size
is the input's own."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from adaptyst_top.placement.advice import Advice
from adaptyst_top.placement.learner import Learner
from adaptyst_top.placement.learner_json import MAX_MODELS, learner_from_json, learner_to_json
from adaptyst_top.placement.objectives import Objective, objective_cost
from adaptyst_top.placement.prediction import Context, Prediction
from adaptyst_top.snapshot import TaskEntry

# A look's runs: their median leaves out one cold run (the first after another
# device's runs: PoCL's SpMV 12-13 ms for 7 ms) wherever the interval splits them.
LOOK_RUNS = 3
LOOK_WAIT = 5  # decisions a look may stay unanswered (the task stopped) before it is dropped
# A move predicted to save less than this is none: two devices within the node's noise
# would trade the task every interval, and each move may copy its data.
MOVE_MIN_GAIN = 0.02
MAX_DEVICES = 16  # names an application may report: the devices a node has, not more
MAX_TASKS = 256  # task names learnt (each up to 16 feature buckets); later ones are not
MAX_SIZES = 64  # measured sizes kept per task and device (for the task screen's points)
MAX_SIZE = 2**63 - 1  # sizes are 64-bit counts
# Models a kept file holds at most (~3.7 KB of JSON each), the most recently run
# first: under the store's 4 MiB, which refuses a larger file whole.
MAX_SAVED = 900


@dataclass
class LearnedTask:
    current: str = ""
    key: str = ""  # the learner's task: "name|feature bucket"
    context: Context = (0, 0)
    size: int = 1
    executions: int = 0
    exploring: str = ""  # the device of a look sent and not all back yet
    look_key: str = ""  # the learner task it looks for (the key may change meanwhile)
    look_left: int = 0  # its runs not back yet
    waited: int = 0  # decisions since that look was sent
    charge: float = 0.0  # what the look offered now costs the learner's budget, if taken


@dataclass
class _Measured:
    """Interval means of one task on one device, per log2 size: the task screen's points."""

    by_octave: dict[int, tuple[int, float, float]] = field(default_factory=dict)

    def add(self, size: int, time_s: float, count: int) -> None:
        octave = max(0, size).bit_length()
        n, s, t = self.by_octave.get(octave, (0, 0.0, 0.0))
        if octave not in self.by_octave and len(self.by_octave) >= MAX_SIZES:
            return
        self.by_octave[octave] = (n + count, s + size * count, t + time_s * count)

    def points(self) -> list[tuple[float, float]]:
        return sorted((s / n, t / n) for n, s, t in self.by_octave.values())


class LearnedAdvisor:
    def __init__(
        self,
        devices: Iterable[str],
        objective: Objective = "time",
        weight: float = 0.5,
        floors_s: dict[str, float] | None = None,
        seed: int = 0,
    ) -> None:
        self.devices = list(devices)
        self.objective: Objective = objective
        self.weight = weight
        self.learner = Learner(self.devices, objective, weight, seed, floors_s, energy=True)
        self.learner.devices = self.devices  # one list: a device an app names is both's
        self.tasks: dict[str, LearnedTask] = {}
        # learner task -> device -> its measured points
        self.measured: dict[str, dict[str, _Measured]] = {}
        self.kept: dict[str, tuple[str, int]] = {}  # task -> (learner task, size) last seen
        self.recent: dict[str, None] = {}  # learner tasks, the most recently run last

    # ----- what the monitor tells it ----------------------------------------------------

    def observe(
        self,
        task: str,
        device: str,
        ctx: Context,
        time_s: float,
        count: int = 1,
        energy_j: float | None = None,
        size: int | None = None,
    ) -> None:
        """COUNT runs of TASK on DEVICE in an interval, TIME_S (and ENERGY_J) a typical one."""
        key = f"{task}|{ctx[1]}"
        if device not in self.devices:
            if len(self.devices) >= MAX_DEVICES:
                return
            self.devices.append(device)  # the learner's list: the same object
        if (task not in self.tasks and len(self.tasks) >= MAX_TASKS) or count < 1:
            return
        st = self.tasks.setdefault(task, LearnedTask())
        st.key, st.context = key, ctx
        st.size = min(MAX_SIZE, max(1, int(size if size is not None else 2 ** min(ctx[0], 63))))
        st.current = st.current or device
        st.executions += count
        self.kept[task] = (st.key, st.size)
        self.recent.pop(key, None)
        self.recent[key] = None
        if device == st.exploring:
            st.look_left -= count
        self.learner.observe(st.key, device, st.size, time_s, energy_j, count)
        if math.isfinite(time_s) and time_s > 0:
            seen = self.measured.setdefault(key, {}).setdefault(device, _Measured())
            seen.add(st.size, time_s, count)

    def set_current(self, task: str, device: str) -> None:
        """Where the task mostly ran in the last interval; a look's runs aside."""
        st = self.tasks.get(task)
        if st is None or device not in self.devices:
            return
        if device != st.exploring:
            st.current = device
        if st.exploring and st.look_left <= 0:  # all its runs are back
            self.learner.back(st.look_key, st.exploring)  # where the key changed meanwhile
            st.exploring, st.waited = "", 0

    # ----- what it says -----------------------------------------------------------------

    def decide(self, task: str) -> Advice | None:
        """A look a device needs (its first warm runs), a move where the posterior means
        say, or a look where a posterior draw says and the budget allows; else None."""
        st = self.tasks.get(task)
        if st is None or not st.current:
            return None
        if st.exploring:
            st.waited += 1
            if st.waited < LOOK_WAIT:
                return None
            self.learner.back(st.look_key, st.exploring)  # never all back: the task stopped
            st.exploring = ""
        st.charge = 0.0
        others = [d for d in self.devices if d != st.current]
        first = self.learner.first_look(st.key, st.size, others) if others else None
        if first is not None and first != st.current:
            return self._look(st, task, first, "not run warm here yet")
        back = self.learner.spell_look(st.key, st.size, others)
        if back is not None:
            return self._look(st, task, back, "slower for a while: looked at again")
        known = [d for d in self.devices if self.learner.ran_on(st.key, d)]
        preds = self.predictions(task)
        best, gain = self._best(st, known, preds)
        if best and best != st.current and gain is not None and gain > MOVE_MIN_GAIN:
            sure = self.learner.p_better(st.key, st.size, best, st.current)
            return self._move(st, task, best, sure or 0.0, preds)
        drawn = self.learner.sample(st.key, st.size, known) if known else None
        if drawn is None:
            return None
        pick, _greedy, extra = drawn
        if pick == st.current or not 0.0 < extra < math.inf:
            return None
        st.charge = extra  # one observation's worth: the learner counts observations
        if not self.learner.charge(st.key, st.charge, commit=False):
            return None
        return self._look(st, task, pick, "it might be the best: a posterior draw says so")

    def standing(
        self, task: str, preds: dict[str, Prediction] | None = None
    ) -> tuple[str, float | None, float | None]:
        """(the device of the least posterior mean among those run, its gain over the
        current device in the objective's terms, the posterior probability that it gains
        at all), PREDS the task's predictions when already made; nothing changes."""
        st = self.tasks.get(task)
        if st is None:
            return "", None, None
        known = [d for d in self.devices if self.learner.ran_on(st.key, d)]
        best, gain = self._best(st, known, self.predictions(task) if preds is None else preds)
        if not best or best == st.current or gain is None:
            return best, gain, None
        return best, gain, self.learner.p_better(st.key, st.size, best, st.current)

    def _best(
        self, st: LearnedTask, known: list[str], preds: dict[str, Prediction]
    ) -> tuple[str, float | None]:
        """The device of the least posterior mean among KNOWN, and its gain over the
        current device (None where either has no finite prediction)."""
        best = self.learner.best(st.key, st.size, known) if st.current in known else None
        if best is None or best not in preds or st.current not in preds:
            return "", None
        here, there = preds[st.current], preds[best]
        was = self.cost(here, here)
        gain = (was - self.cost(there, here)) / was if 0 < was < math.inf else None
        return best, gain if gain is not None and math.isfinite(gain) else None

    def predictions(self, task: str) -> dict[str, Prediction]:
        """Each device the task ran on, at its current input: the posterior median, its
        one-sigma factor less one as rel_err; `measured` where runs of this size there
        were seen, `fit` where only other sizes were."""
        st = self.tasks.get(task)
        out: dict[str, Prediction] = {}
        if st is None:
            return out
        octave = st.size.bit_length()
        for d in self.devices:
            est = self.learner.estimate(st.key, d, st.size)
            model = self.learner.models.get((st.key, d, "t"))
            if est is None or model is None or not 0 < est.time_s < math.inf:
                continue
            seen = self.measured.get(st.key, {}).get(d)
            source = "measured" if seen is not None and octave in seen.by_octave else "fit"
            out[d] = Prediction(est.time_s, est.energy_j, est.time_factor - 1, model.n, source)
        return out

    def cost(self, p: Prediction, ref: Prediction) -> float:
        return objective_cost(
            self.objective, self.weight, p.time_s, p.energy_j, ref.time_s, ref.energy_j
        )

    def accepted(self, advice: Advice) -> None:
        """The advice was applied: a look is under way (and charged), or the task moved."""
        st = self.tasks.get(advice.task)
        if st is None:
            return
        if advice.explore:
            st.exploring, st.look_key, st.waited = advice.suggested, st.key, 0
            st.look_left = advice.runs or LOOK_RUNS
            self.learner.look_sent(st.key, advice.suggested)
            self.learner.charge(st.key, st.charge)
        else:
            st.current = advice.suggested

    def _look(self, st: LearnedTask, task: str, device: str, because: str) -> Advice:
        preds = self.predictions(task)
        there = preds.get(device)
        said = f"{there.short()} ±{100 * there.rel_err:.0f}%" if there else "no run yet"
        why = f"explore: {device} ({said}) {because}; {LOOK_RUNS} runs to measure it"
        shown = {d: p.to_json() for d, p in preds.items() if d in (device, st.current)}
        return Advice(task, st.current, device, 0.0, None, 0.0, why, shown, True, LOOK_RUNS)

    def _move(
        self, st: LearnedTask, task: str, best: str, confidence: float, preds: dict[str, Prediction]
    ) -> Advice:
        there, here = preds[best], preds[st.current]
        energy_gain = (
            1 - there.energy_j / here.energy_j if there.energy_j and here.energy_j else None
        )
        why = (
            f"{self.objective}: {best} {there.short()} ±{100 * there.rel_err:.0f}% vs "
            f"{st.current} {here.short()} ±{100 * here.rel_err:.0f}% for inputs ~{st.size}; "
            f"{there.samples}+{here.samples} intervals learnt"
        )
        shown = {best: there.to_json(), st.current: here.to_json()}
        time_gain = 1 - there.time_s / here.time_s if here.time_s > 0 else 0.0
        return Advice(task, st.current, best, time_gain, energy_gain, confidence, why, shown)

    # ----- what the monitor shows and keeps ---------------------------------------------

    def state(self, task: str, best: str, gain: float | None) -> str:
        """What the task waits for, in a word (docs/placement.md, "States")."""
        st = self.tasks[task]
        if st.exploring:
            return "exploring"  # a look's runs are under way
        others = [d for d in self.devices if d != st.current]
        if others and self.learner.first_look(st.key, st.size, others) not in (None, st.current):
            return "learning"  # a device that may win has no warm run yet
        if not best or best == st.current or gain is None or gain <= 0:
            return "settled"
        if gain <= MOVE_MIN_GAIN:
            return "in noise"
        return "holding"  # moved at the next decision (auto), or offered (suggest)

    def entries(self) -> tuple[TaskEntry, ...]:
        """Its tasks as a snapshot carries them."""
        from adaptyst_top.placement.learned_view import learned_entries  # it reads this

        return learned_entries(self)

    def task_names(self) -> list[str]:
        return list(self.tasks)

    def context(self, task: str) -> Context:
        st = self.tasks.get(task)
        return st.context if st is not None else (0, 0)

    def unplaced(self) -> list[str]:
        """Tasks the kept models know that have not run here yet."""
        return sorted(set(self.kept) - set(self.tasks))

    def remembered(self, task: str) -> str | None:
        """Where the kept models place TASK at the input it last had, before it runs."""
        key, size = self.kept.get(task, ("", 0))
        if not key or not any(self.learner.ran_on(key, d) for d in self.devices):
            return None
        known = [d for d in self.devices if self.learner.ran_on(key, d)]
        return self.learner.best(key, size, known)

    def to_json(self) -> dict[str, Any]:
        saved: set[str] = set()
        models = 0
        per_key = Counter(task for task, _d, _q in self.learner.models)
        for key in reversed(self.recent):  # the most recently run first
            n = per_key[key]
            if models + n > MAX_SAVED:
                break
            saved.add(key)
            models += n
        last = {t: [key, size] for t, (key, size) in self.kept.items() if key in saved}
        return {"learner": learner_to_json(self.learner, saved), "last": last}

    def from_json(self, d: object) -> str | None:
        """Take kept models (to_json's); None when taken, else why not, in one line."""
        if not isinstance(d, dict) or not isinstance(d.get("last"), dict):
            return "kept models: no 'last' map"
        if len(d["last"]) > MAX_MODELS:
            return "kept models: too many tasks"
        last: dict[str, tuple[str, int]] = {}
        for task, v in d["last"].items():
            ok = isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and len(v[0]) < 300
            if not ok or type(v[1]) is not int or not 0 < v[1] <= MAX_SIZE or len(task) > 256:
                return "kept models: a damaged 'last' entry"
            last[task] = (v[0], v[1])
        why = learner_from_json(d.get("learner"), self.learner)
        if why is None:
            self.kept.update(last)
            # What was kept is older than anything run here: saved after it, if room.
            kept = {t: None for t, _d, _q in self.learner.models}
            self.recent = {**kept, **self.recent}
        return why

    def learned_count(self) -> int:
        return len(self.learner.models)
