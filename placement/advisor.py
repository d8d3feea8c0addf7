"""The placement advisor (after DyPe): per task, predict time and energy on every
device for the current input, keep the Pareto front, and advise a move only when
the predicted gain beats a threshold and the uncertainty, for several decisions in
a row; devices not yet measured are explored, within a bound.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from adaptyst_top.collectors.snapshot import AdviceEntry
from adaptyst_top.placement.model import Context, Prediction, TaskDeviceModel, bucket_size

Objective = Literal["time", "energy", "edp", "weighted"]
EXPLORE_RUNS = 5  # executions an exploration takes on the other device
# A device measured in few runs whose optimistic estimate would still beat the current
# one is measured again, until it has this many runs for the input: five runs on a
# shared node can all land in a slow spell (seen here: PoCL at 14 ms, then 9 ms for good),
# and a device never run again is never seen to be faster.
RECHECK_SAMPLES = 15


@dataclass
class TransferModel:
    """Cost of moving a task's data to another device: latency + bytes / bandwidth."""

    latency_s: float = 20e-6
    bandwidth_bps: float = 8e9
    bytes_per_item: float = 8.0
    # A move is paid once and then serves many runs: it is spread over this many.
    horizon_runs: int = 20

    def cost_s(self, src: str, dst: str, size: int) -> float:
        """The one-time cost of moving the data, per run over the horizon."""
        if src == dst:
            return 0.0
        return (
            self.latency_s + size * self.bytes_per_item / self.bandwidth_bps
        ) / self.horizon_runs


@dataclass
class Advice:
    task: str
    current: str
    suggested: str
    time_gain: float  # predicted fraction of the current time saved
    energy_gain: float | None
    confidence: float
    why: str
    predicted: dict[str, dict[str, Any]] = field(default_factory=dict)
    explore: bool = False
    runs: int | None = None  # an exploration: only this many executions there

    def entry(self) -> AdviceEntry:
        """As the snapshot carries it."""
        return AdviceEntry(
            task=self.task,
            current=self.current,
            suggested=self.suggested,
            time_gain=round(self.time_gain, 4),
            energy_gain=None if self.energy_gain is None else round(self.energy_gain, 4),
            confidence=round(self.confidence, 3),
            why=self.why,
            predicted=self.predicted,
            explore=self.explore,
        )


@dataclass
class TaskState:
    current: str = ""
    context: Context = (0, 0)
    size: int = 1
    executions: int = 0
    since_explore: int = 0
    streak: int = 0
    streak_target: str = ""
    # device -> (input context, executions count) of its last run of this task: data a
    # recent run (an exploration) left there needs no second transfer.
    ran: dict[str, tuple[Context, int]] = field(default_factory=dict)


class Advisor:
    def __init__(
        self,
        devices: Iterable[str],
        objective: Objective = "time",
        weight: float = 0.5,
        threshold: float = 0.08,
        sustain: int = 2,
        explore_every: int = 8,
        transfer: TransferModel | None = None,
        memory_bytes: dict[str, int] | None = None,
    ) -> None:
        self.devices = list(devices)
        self.objective: Objective = objective
        self.weight = weight
        self.threshold = threshold
        self.sustain = sustain
        self.explore_every = explore_every
        self.transfer = transfer or TransferModel()
        self.memory_bytes = memory_bytes or {}
        self.models: dict[tuple[str, str], TaskDeviceModel] = {}
        self.tasks: dict[str, TaskState] = {}

    def model(self, task: str, device: str) -> TaskDeviceModel:
        return self.models.setdefault((task, device), TaskDeviceModel(task, device))

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
        self.model(task, device).observe(ctx, time_s, count, energy_j, size)
        st = self.tasks.setdefault(task, TaskState())
        if not st.current:
            st.current = device
        st.context = ctx
        st.size = size if size is not None else int(bucket_size(ctx[0]))
        st.executions += count
        st.since_explore += count
        st.ran[device] = (ctx, st.executions)

    def set_current(self, task: str, device: str) -> None:
        """Where the task mostly ran in the last interval (explorations aside)."""
        st = self.tasks.get(task)
        if st is not None:
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
        t = p.time_s + move_s
        e = p.energy_j if p.energy_j is not None else None
        if self.objective == "time" or e is None or ref.energy_j in (None, 0):
            return float(t)
        if self.objective == "energy":
            return float(e)
        if self.objective == "edp":
            return float(e * t)
        return float(self.weight * t / ref.time_s + (1 - self.weight) * e / float(ref.energy_j))

    def predictions(self, task: str) -> dict[str, Prediction]:
        st = self.tasks[task]
        out = {}
        for d in self.devices:
            m = self.models.get((task, d))
            p = m.predict(st.context, st.size) if m else None
            if p is not None:
                out[d] = p
        return out

    def pareto(self, task: str) -> list[tuple[str, float, float | None]]:
        """Devices whose (time, energy) no other device beats on both, for the current input."""
        preds = self.predictions(task)
        front = []
        for d, p in preds.items():
            dominated = any(
                q.time_s <= p.time_s
                and q.energy_j is not None
                and p.energy_j is not None
                and q.energy_j <= p.energy_j
                and (q.time_s < p.time_s or q.energy_j < p.energy_j)
                for o, q in preds.items()
                if o != d
            )
            if not dominated:
                front.append((d, p.time_s, p.energy_j))
        return sorted(front, key=lambda x: x[1])

    def decide(self, task: str) -> Advice | None:
        st = self.tasks.get(task)
        if st is None or not st.current:
            return None
        preds = self.predictions(task)
        cur = preds.get(st.current)
        feasible = [d for d in self.devices if self._feasible(d, st.size)]
        unmeasured = [d for d in feasible if d not in preds]
        # Bounded exploration: one run on an unmeasured device every explore_every runs.
        if unmeasured and st.since_explore >= self.explore_every and cur is not None:
            d = unmeasured[0]
            why = f"explore: no measurement of {task} on {d} for this input yet"
            return self._explore(task, st, d, why, {st.current: cur})
        if cur is None or len(preds) < 2:
            return None
        scores = {
            d: self._score(p, cur, self._move_s(st, d)) for d, p in preds.items() if d in feasible
        }
        best = min(scores, key=lambda d: scores[d])
        if best == st.current:
            st.streak = 0
            return self._recheck(task, st, preds, scores)
        if preds[best].source == "fit":
            # Predicted from other input sizes only: measure it here before moving.
            if st.since_explore < self.explore_every:
                return None
            why = (
                f"explore: {best} predicted {_fmt(preds[best])} from other sizes; "
                "measuring it for this input"
            )
            return self._explore(task, st, best, why, {best: preds[best]})
        gain = (scores[st.current] - scores[best]) / scores[st.current]
        uncertainty = preds[best].rel_err + cur.rel_err
        if gain > self.threshold and gain > uncertainty:
            st.streak = st.streak + 1 if st.streak_target == best else 1
            st.streak_target = best
        else:
            st.streak = 0
            return self._recheck(task, st, preds, scores)
        if st.streak < self.sustain:
            return None
        pb = preds[best]
        time_gain = 1 - (pb.time_s + self._move_s(st, best)) / cur.time_s
        energy_gain = (1 - pb.energy_j / cur.energy_j) if (pb.energy_j and cur.energy_j) else None
        confidence = max(0.0, min(1.0, 1 - uncertainty)) * min(
            1.0, min(pb.samples, cur.samples) / 5
        )
        why = (
            f"{self.objective}: {best} {_fmt(pb)} vs {st.current} {_fmt(cur)} "
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
            {best: _pred_json(pb), st.current: _pred_json(cur)},
        )

    def _recheck(
        self, task: str, st: TaskState, preds: dict[str, Prediction], scores: dict[str, float]
    ) -> Advice | None:
        """Measure again a device that few runs put behind but that could well be ahead:
        its optimistic estimate (two standard errors better, or its best run) beats the
        current device by more than the threshold. Bounded like any exploration, and by
        RECHECK_SAMPLES runs of that device for this input."""
        if st.since_explore < self.explore_every:
            return None
        cur = preds[st.current]
        hopeful = {
            d: self._score(_optimistic(p), cur, self._move_s(st, d))
            for d, p in preds.items()
            if d != st.current
            and d in scores
            and p.source == "measured"
            and p.samples < RECHECK_SAMPLES
        }
        hopeful = {
            d: v for d, v in hopeful.items() if v < scores[st.current] * (1 - self.threshold)
        }
        if not hopeful:
            return None
        d = min(hopeful, key=lambda x: hopeful[x])
        p = preds[d]
        why = (
            f"recheck: {d} {_fmt(p)} ±{100 * p.rel_err:.0f}% over {p.samples} runs could "
            f"still beat {st.current} {_fmt(cur)}; measuring it again"
        )
        return self._explore(task, st, d, why, {d: p, st.current: cur})

    def _explore(
        self, task: str, st: TaskState, device: str, why: str, shown: dict[str, Prediction]
    ) -> Advice:
        """EXPLORE_RUNS executions on a device, then back; the next one waits its turn."""
        st.since_explore = 0
        predicted = {d: _pred_json(p) for d, p in shown.items()}
        return Advice(task, st.current, device, 0.0, None, 0.0, why, predicted, True, EXPLORE_RUNS)

    def accepted(self, advice: Advice) -> None:
        """The advice was applied: reset the hysteresis; a move changes the current device."""
        st = self.tasks.get(advice.task)
        if st is not None:
            st.streak, st.streak_target = 0, ""
            st.since_explore = 0
            if not advice.explore:
                st.current = advice.suggested


def _optimistic(p: Prediction) -> Prediction:
    """The prediction two standard errors better, or as good as the device's best run
    if that is better still (never below a tenth of it)."""
    f = 1 - 2 * p.rel_err
    if p.best_s is not None and p.time_s > 0:
        f = min(f, p.best_s / p.time_s)
    f = max(0.1, f)
    energy = None if p.energy_j is None else p.energy_j * f
    return replace(p, time_s=p.time_s * f, energy_j=energy)


def _fmt(p: Prediction) -> str:
    e = "" if p.energy_j is None else f", {p.energy_j * 1e3:.3g} mJ"
    return f"{p.time_s * 1e3:.3g} ms{e}"


def _pred_json(p: Prediction) -> dict[str, Any]:
    return {
        "time_s": p.time_s,
        "energy_j": p.energy_j,
        "rel_err": round(p.rel_err, 3),
        "samples": p.samples,
        "source": p.source,
    }
