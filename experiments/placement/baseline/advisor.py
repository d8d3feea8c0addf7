"""The placement advisor (after DyPe): per task, predict time and energy on every
device for the current input, keep the Pareto front, and advise a move only when
the predicted gain beats a threshold and the uncertainty, for several decisions in
a row; devices not yet measured are explored when the exploration is worth its cost
(exploration.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from adaptyst_top.placement import device_priors as dp
from adaptyst_top.placement.advice import Advice as Advice
from adaptyst_top.placement.objectives import Objective as Objective
from adaptyst_top.placement.objectives import objective_cost
from adaptyst_top.snapshot import TaskEntry
from experiments.placement.baseline import exploration as ex
from experiments.placement.baseline import priors as pr
from experiments.placement.baseline.exploration import EXPLORE_RUNS as EXPLORE_RUNS
from experiments.placement.baseline.model import (
    Context,
    Prediction,
    TaskDeviceModel,
    bucket_size,
    pareto_front,
)
from experiments.placement.baseline.task_state import TaskState as TaskState
from experiments.placement.baseline.transfer import TransferModel as TransferModel

# A device measured in fewer runs than this for an input, whose optimistic estimate
# would still beat the current one, may be measured again: five runs on a shared node
# can all land in a slow spell (seen here: PoCL at 14 ms, then 9 ms for good), and a
# device never run again is never seen to be faster.
RECHECK_SAMPLES = 15
# A gain under the move threshold is real once both devices ran the input this often,
# in rechecks spread over the task's run (a slow spell lasts seconds here).
SETTLED_SAMPLES = 8
# A device measured better than the current one, by more than a tie but within the
# noise, is rechecked past RECHECK_SAMPLES until the noise settles it, up to this many
# runs (each recheck's cost is charged to the exploration budget as ever).
UNDECIDED_MAX_SAMPLES = 4 * RECHECK_SAMPLES
MOVE_MIN_SAMPLES = 2  # a move rests on at least this many runs there (one may carry a transfer)


class Advisor:
    def __init__(
        self,
        devices: Iterable[str],
        objective: Objective = "time",
        weight: float = 0.5,
        threshold: float = 0.08,
        settled_threshold: float = 0.02,
        sustain: int = 2,
        explore_every: int = 8,
        transfer: TransferModel | None = None,
        memory_bytes: dict[str, int] | None = None,
        kinds: dict[str, str] | None = None,
    ) -> None:
        self.devices = list(devices)
        self.objective: Objective = objective
        self.weight = weight
        self.threshold = threshold
        self.settled_threshold = settled_threshold
        self.sustain = sustain
        self.explore_every = explore_every
        self.transfer = transfer or TransferModel()
        self.memory_bytes = memory_bytes or {}
        self.kinds = kinds or {}  # device -> "gpu" | "cpu" (device_priors.kind_of)
        self.models: dict[tuple[str, str], TaskDeviceModel] = {}
        self.tasks: dict[str, TaskState] = {}

    def model(self, task: str, device: str) -> TaskDeviceModel:
        return self.models.setdefault((task, device), TaskDeviceModel(task, device))

    def preload(self, models: Iterable[TaskDeviceModel]) -> int:
        """Priors kept from earlier runs (as StarPU's performance models): a task they
        cover is placed at its first decision, unexplored. Taken: those of this node's
        devices not learning here already; how many."""
        new = [m for m in models if m.device in self.devices]
        new = [m for m in new if (m.task, m.device) not in self.models]
        self.models.update(((m.task, m.device), m) for m in new)
        return len(new)

    def remembered(self, task: str) -> str | None:
        """Where the priors place TASK before it has run here (priors.remembered)."""
        known = [m for (t, _d), m in self.models.items() if t == task]
        return pr.remembered(
            known, lambda p, ref: self._score(p, ref, 0.0), self.threshold, MOVE_MIN_SAMPLES
        )

    def entries(self) -> tuple[TaskEntry, ...]:
        """Its tasks as a snapshot carries them."""
        from experiments.placement.baseline.task_view import task_entries  # it reads this

        return task_entries(self)

    def task_names(self) -> list[str]:
        return list(self.tasks)

    def context(self, task: str) -> Context:
        st = self.tasks.get(task)
        return st.context if st is not None else (0, 0)

    def unplaced(self) -> list[str]:
        """Tasks the priors know that have not run here yet."""
        return sorted({t for t, _d in self.models} - set(self.tasks))

    def learned(self) -> list[TaskDeviceModel]:
        return [m for m in self.models.values() if m.samples > 0]  # worth keeping

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
        if device not in self.devices:
            self.devices.append(device)
        st = self.tasks.setdefault(task, TaskState())
        if not st.current:
            st.current = device
        if device != st.current:
            # An exploration: charge what it cost over the current device's runs here.
            here = self.models.get((task, st.current))
            p = here.predict(ctx, size) if here else None
            if p is not None and p.time_s > 0:
                there = self.models.get((task, device))
                first = there is None or ctx not in there.time or there.time[ctx].n == 0
                n = size if size is not None else int(bucket_size(ctx[0]))
                upload = self.transfer.upload_s(n) if first else 0.0
                extra = ex.charged_runs(time_s, count, p.time_s, upload)
                st.explore_spent[ctx] = st.explore_spent.get(ctx, 0.0) + extra
        cold = device == st.switch_in
        if cold:
            st.switch_in = ""
        ran_ctx, at = st.ran.get(device, (None, 0))
        if device == st.current:
            st.relook = None  # a move, or runs at home: no look under way
        elif ran_ctx == ctx and st.executions >= ex.RELOOK_GROWTH * at:
            st.relook = (device, ctx)
        model = self.model(task, device)
        starts = model.time[ctx].starts if ctx in model.time else 0
        if not (cold and count == 1):
            # The first run of a measuring exploration that follows the other device's
            # runs is cold (PoCL here: 12-13 ms for a 7 ms SpMV; the CPU 0.16 ms for a
            # 0.11 ms SpMV after PoCL's runs), as the first run after a move is, once.
            # Charged above, not learned from, as the oracle leaves out the first run of
            # each block. An interval's mean of several runs (the monitor) keeps it: the
            # monitor takes those runs' median instead (loop.py).
            retake = st.relook == (device, ctx)
            st.relook = None if retake else st.relook
            model.observe(ctx, time_s, count, energy_j, size, retake)
        st.context = ctx
        st.size = size if size is not None else int(bucket_size(ctx[0]))
        st.executions += count
        if ctx in model.time and model.time[ctx].starts > starts:
            st.started_over[device] = (ctx, st.executions)
        st.since_explore += count
        st.ran[device] = (ctx, st.executions)

    def set_current(self, task: str, device: str) -> None:
        """Where the task mostly ran in the last interval (explorations aside: an
        exploration of a few runs can be most of an interval's runs, once)."""
        st = self.tasks.get(task)
        if st is not None:
            exploring, st.exploring = st.exploring, ""
            if device != exploring:
                st.current = device

    # ----- scoring -----------------------------------------------------------------------

    def _move_s(self, st: TaskState, device: str) -> float:
        """The transfer cost of moving the task to a device, per run: none when it ran
        there on this input within the horizon (its data is still there, as the demo's
        kernels and iterative solvers keep it; a copy made on every run is already part
        of every measured run)."""
        ctx, at = st.ran.get(device, ((-1, -1), -(10**9)))
        if ctx == st.context and st.executions - at <= self.transfer.horizon_runs:
            return 0.0
        return self.transfer.cost_s(st.current, device, st.size)

    def _feasible(self, device: str, size: int) -> bool:
        limit = self.memory_bytes.get(device)
        return limit is None or size * self.transfer.bytes_per_item <= limit

    def _score(self, p: Prediction, ref: Prediction, move_s: float) -> float:
        return objective_cost(
            self.objective, self.weight, p.time_s + move_s, p.energy_j, ref.time_s, ref.energy_j
        )

    def cost(self, p: Prediction, ref: Prediction) -> float:
        """P's cost in the objective's terms, REF the current device's (for the weighted
        objective's scales), without a transfer: what a move log measures gains in."""
        return self._score(p, ref, 0.0)

    def standing(
        self, task: str, preds: dict[str, Prediction]
    ) -> tuple[str, float | None, float | None]:
        """(the device the models say for the task's current input and objective, its
        gain over the current device's cost, how sure: 1 - both relative errors), from
        PREDS, the task's predictions. Unlike decide, nothing changes: what the task
        table shows between moves."""
        st = self.tasks.get(task)
        cur = preds.get(st.current) if st is not None else None
        if st is None or cur is None:
            return "", None, None
        scores = {
            d: self._score(p, cur, self._move_s(st, d))
            for d, p in preds.items()
            if d == st.current or self._feasible(d, st.size)
        }
        best = min(scores, key=lambda d: scores[d])
        here = scores[st.current]
        gain = (here - scores[best]) / here if here > 0 else None
        return best, gain, max(0.0, 1.0 - preds[best].rel_err - cur.rel_err)

    def predictions(self, task: str) -> dict[str, Prediction]:
        """Every device's cost for the task's current input: measured, fitted over sizes,
        or (a device that never ran this input) the current device's cost here times
        the two devices' ratio at the nearest input both ran."""
        st = self.tasks[task]
        out = {}
        for d in self.devices:
            m = self.models.get((task, d))
            p = m.predict(st.context, st.size) if m else None
            if p is not None:
                out[d] = p
        here = out.get(st.current)
        cur_model = self.models.get((task, st.current))
        if here is not None and cur_model is not None:
            for d in self.devices:
                m = self.models.get((task, d))
                if d not in out and m is not None:
                    q = ex.from_neighbours(m, cur_model, st.context, here, st.size)
                    if q is not None:
                        out[d] = q
        return out

    def pareto(
        self, task: str, preds: dict[str, Prediction] | None = None
    ) -> list[tuple[str, float, float | None]]:
        """Devices whose (time, energy) no other device beats on both, for the current
        input (PREDS: the task's predictions, when already made)."""
        return pareto_front(self.predictions(task) if preds is None else preds)

    def decide(self, task: str) -> Advice | None:
        st = self.tasks.get(task)
        if st is None or not st.current:
            return None
        preds = self.predictions(task)
        cur = preds.get(st.current)
        if cur is None:
            return None
        feasible = [d for d in self.devices if self._feasible(d, st.size)]
        scores = {
            d: self._score(p, cur, self._move_s(st, d)) for d, p in preds.items() if d in feasible
        }
        # Moves go only where this input really ran, since the current device's cost
        # last moved; predictions and older runs lead to explorations.
        movable = [
            d
            for d in scores
            if d == st.current
            or (
                preds[d].source == "measured"
                and preds[d].samples >= MOVE_MIN_SAMPLES
                and not st.stale(d)
            )
        ]
        best = min(movable, key=lambda d: scores[d])
        if best != st.current:
            gain = (scores[st.current] - scores[best]) / scores[st.current]
            uncertainty = preds[best].rel_err + cur.rel_err
            threshold = self.threshold_for(preds[best], cur)
            if gain > threshold and gain > uncertainty:
                st.streak = st.streak + 1 if st.streak_target == best else 1
                st.streak_target = best
                # Clear evidence moves at once; a gain near the noise must hold a while.
                needed = 1 if gain > threshold + 2 * uncertainty else self.sustain
                if st.streak < needed:
                    return None
                return self._move(task, st, best, preds, cur, uncertainty)
        st.streak = 0
        return self._exploration(task, st, preds, scores, feasible)

    def threshold_for(self, there: Prediction, here: Prediction) -> float:
        """The gain a move must beat. A few runs of a device on a shared node can all
        fall in one slow or fast spell, so a gain under `threshold` is taken for noise;
        once both devices ran this input SETTLED_SAMPLES times (spread over the task's
        run by the rechecks, and reset by the drift detector when a device changes), a
        smaller gain (`settled_threshold`) is real: the 3-6% gains of devices near
        their crossover were otherwise lost for good (placement_eval: 5.8% lost on
        SpMV 80,000 rows under the weighted objective)."""
        measured = there.source == here.source == "measured"
        if measured and min(there.samples, here.samples) >= SETTLED_SAMPLES:
            return self._settled()
        return self.threshold

    def _settled(self) -> float:
        return min(self.threshold, self.settled_threshold)

    def _move(
        self,
        task: str,
        st: TaskState,
        best: str,
        preds: dict[str, Prediction],
        cur: Prediction,
        uncertainty: float,
    ) -> Advice:
        pb = preds[best]
        time_gain = 1 - (pb.time_s + self._move_s(st, best)) / cur.time_s
        energy_gain = (1 - pb.energy_j / cur.energy_j) if (pb.energy_j and cur.energy_j) else None
        confidence = max(0.0, min(1.0, 1 - uncertainty)) * min(
            1.0, min(pb.samples, cur.samples) / 5
        )
        why = (
            f"{self.objective}: {best} {pb.short()} vs {st.current} {cur.short()} "
            f"for inputs ~{int(bucket_size(st.context[0]))}; "
            f"{pb.samples}+{cur.samples} runs ({pb.source}/{cur.source})"
        )
        return Advice(
            task,
            st.current,
            best,
            time_gain,
            energy_gain,
            confidence,
            why,
            {best: pb.to_json(), st.current: cur.to_json()},
        )

    def _exploration(
        self,
        task: str,
        st: TaskState,
        preds: dict[str, Prediction],
        scores: dict[str, float],
        feasible: list[str],
    ) -> Advice | None:
        """The exploration worth making now, if any (exploration.py: charged in runs of
        the current device against a budget and the gain it could bring). Spaced by
        explore_every runs, except for an input not explored yet (an input shift) and
        for the measurement that follows a promising first run."""
        spaced = st.since_explore >= self.explore_every or st.context != st.explored_ctx
        cur = preds[st.current]
        s_cur = scores[st.current]
        options = []
        for d in feasible:
            if d == st.current:
                continue
            p = preds.get(d)
            if p is None:
                if not spaced:
                    continue
                kind = dp.kind_of(d, self.kinds)
                cost, gain = dp.first_look(kind, cur.time_s)
                why = f"explore: no measurement of {task} on {d} ({kind}) for this input yet"
                options.append(ex.Option(d, ex.PROBE_RUNS, cost, gain, why))
                continue
            stale = st.stale(d)
            ran_ctx, at = st.ran.get(d, (None, 0))
            aged = ex.widening(p.samples, st.executions, at) if ran_ctx == st.context else 1.0
            if p.source == "measured" and p.samples >= RECHECK_SAMPLES and not stale:
                # Measured enough here: it stands where it stands, unless it measured
                # better by more than a tie and the noise of a shared node still hides
                # it (CI: PoCL's logistic map at 14.1 against 16.6 ms, over one first
                # run and four rechecks that ranged 10-23 ms, was never taken again),
                # or its look has aged (all of it may have been one slow spell).
                undecided = p.samples < UNDECIDED_MAX_SAMPLES and scores.get(d, s_cur) < s_cur * (
                    1 - self._settled()
                )
                if not undecided and aged == 1.0:
                    continue
            if not spaced and not (p.source == "measured" and p.samples <= ex.EXPLORE_RUNS):
                continue  # spaced, unless it follows up a promising first look
            upload = self.transfer.upload_s(st.size)
            move = self._move_s(st, d)
            hope = self._score(ex.optimistic(p, upload, aged), cur, move)
            gain = (s_cur - hope) / s_cur if s_cur > 0 else 0.0
            recheck = p.source == "measured" and p.samples >= MOVE_MIN_SAMPLES
            # A device measured here as better than the current one, by less than the
            # move threshold, its data still there, is rechecked until it has the runs
            # that decide it (nearly free: it runs faster).
            close = recheck and move == 0 and scores.get(d, s_cur) < s_cur
            if gain <= (self._settled() if close else self.threshold):
                continue
            expect = self._score(ex.expected(p, upload), cur, move)
            ratio = expect / s_cur if s_cur > 0 else 1.0
            runs = ex.EXPLORE_RUNS if ratio <= ex.CLOSE_RATIO else ex.PROBE_RUNS
            if st.cold(d) and (recheck or runs > 1):
                runs += 1  # its first run is cold (observe): one more to learn from
            what = {
                "measured": f"±{100 * p.rel_err:.0f}% over {p.samples} runs",
                "fit": "fitted over other sizes",
                "ratio": "from the nearest input both ran",
            }.get(p.source, p.source)
            why = (
                f"explore: {d} {p.short()} ({what}) could beat {st.current} {cur.short()} "
                f"by up to {100 * gain:.0f}%; {runs} run{'s' if runs > 1 else ''} to measure it"
            )
            options.append(ex.Option(d, runs, runs * max(0.0, ratio - 1), gain, why))
        pick = ex.choose(options, st.executions, st.explore_spent.get(st.context, 0.0))
        if pick is None:
            return None
        st.explored_ctx = st.context
        shown = {d: p for d, p in preds.items() if d in (pick.device, st.current)}
        return self._explore(task, st, pick.device, pick.why, shown, pick.runs)

    def _explore(
        self,
        task: str,
        st: TaskState,
        device: str,
        why: str,
        shown: dict[str, Prediction],
        runs: int,
    ) -> Advice:
        """A few executions on a device, then back; the next one waits its turn."""
        st.since_explore = 0
        predicted = {d: p.to_json() for d, p in shown.items()}
        return Advice(task, st.current, device, 0.0, None, 0.0, why, predicted, True, runs)

    def accepted(self, advice: Advice) -> None:
        """The advice was applied: reset the hysteresis; a move changes the current device."""
        st = self.tasks.get(advice.task)
        if st is not None:
            st.streak, st.streak_target = 0, ""
            st.since_explore = 0
            if advice.explore:
                st.exploring = advice.suggested
                cold = st.cold(advice.suggested) and (advice.runs or 1) > 1
                st.switch_in = advice.suggested if cold else ""
            else:
                st.current = advice.suggested
                st.relook = None
