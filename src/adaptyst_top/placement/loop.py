"""The advisor inside the monitor: each snapshot's task probe rows become observations
(count and time deltas per task, device and input bucket, from the kernel's
statistics), device power becomes per-task energy, and the advice is the advisor's part
of the next snapshot; in auto mode, and when applied, it is pushed over the control
channel."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from adaptyst_top.collectors.energy.task_runs import run_joules
from adaptyst_top.placement.advice import Advice
from adaptyst_top.placement.control import ControlServer
from adaptyst_top.placement.kernel_clock import KernelClock, device_ns, on_accelerator
from adaptyst_top.placement.move_log import MoveLog
from adaptyst_top.placement.placer import Placer
from adaptyst_top.placement.task_keys import parse_key
from adaptyst_top.snapshot import (
    AdvisorState,
    Move,
    PlacementPart,
    ProbeEntry,
    Snapshot,
)
from adaptyst_top.snapshot.histogram import percentile

TASK_PROBE_NAME = "adaptyst:task_begin..task_end"
FEW_RUNS = 8


@dataclass
class _Run:
    """A task's runs in one bucket on one device since the last snapshot."""

    task: str
    device: str
    sb: int
    fb: int
    mean_s: float
    dn: int


@dataclass
class _Seen:
    count: int = 0
    total_ns: float = 0.0
    hist: dict[int, int] = field(default_factory=dict)


def interval_median_ns(p: ProbeEntry, seen: _Seen) -> float | None:
    """The median of the runs since SEEN, from the histogram's growth (net of the
    probe's cost, as p50_ns is); without histograms, the median of all of the key's
    runs. The cumulative median lags an interval's: CI's demo fed PoCL's logistic map
    at 14.1, 14.7, 10.0, 10.0 ms over four looks whose runs were ~9 ms after the first."""
    if p.hist is None:
        seen.hist = {}
        return p.p50_ns
    now = dict(p.hist)
    if any(now.get(b, 0) < c for b, c in seen.hist.items()):
        grown = now  # the probe started over: all it holds is new
    else:
        grown = {b: c - seen.hist.get(b, 0) for b, c in now.items() if c > seen.hist.get(b, 0)}
    seen.hist = now
    mid = percentile(grown, 0.5)
    if mid is None:
        return p.p50_ns
    off = (p.raw.mean_ns or 0.0) - (p.mean_ns or 0.0) if p.raw is not None else 0.0
    return max(0.0, mid - off)


class PlacementLoop:
    def __init__(
        self,
        advisor: Placer,
        control: ControlServer | None = None,
        mode: str = "suggest",
        keep: Callable[[], object] | None = None,
        prior: str = "",
    ) -> None:
        """keep: called when the loop closes, to keep what was learnt (the next run's
        priors); prior: a line on the models this run started from."""
        self.advisor = advisor
        self.control = control
        self.mode = mode
        self.keep = keep
        self.prior = prior
        self.seen: dict[str, _Seen] = {}
        self.advice: dict[str, Advice] = {}
        self.log = MoveLog(advisor.cost)
        self._t: float | None = None  # the last snapshot's time: a move's
        self._lock = threading.Lock()
        self._placed: set[str] = set()  # tasks placed from the priors before they ran
        self.clock = KernelClock()
        self.device_clocked: set[str] = set()  # tasks whose accelerator runs it timed

    def set_mode(self, mode: str) -> None:
        self.mode = "auto" if mode == "auto" else "suggest"
        if self.mode == "auto":
            self._place_remembered()

    def _place_remembered(self) -> None:
        """Tasks that have not run yet start where the kept models place them: the
        standing assignment an application gets when it registers, before its first run
        (else the first interval's runs go to its default device)."""
        if self.control is None:
            return
        with self._lock:
            placed = []
            for task in self.advisor.unplaced():
                if task in self._placed:
                    continue
                device = self.advisor.remembered(task)
                if device is not None:
                    self._placed.add(task)
                    self.control.push(task, device, "where earlier runs placed it")
                    placed.append(f"{task} on {device}")
            if placed:
                start = "placed at start: " + ", ".join(placed)
                self.prior = f"{self.prior}; {start}" if self.prior else start

    def update(self, snap: Snapshot) -> PlacementPart:
        """Learn from one snapshot; the tasks, advice and state for the snapshot to carry."""
        with self._lock:
            self._t = snap.t
            runs = self._runs(snap)
            clocked = self._on_device_clock(runs, self.clock.interval(snap.probes))
            self.device_clocked |= clocked
            ran: dict[str, dict[str, int]] = {}
            for r in runs:
                energy = run_joules(r.device, snap.devices, r.mean_s)
                bucket = (r.sb, r.fb)
                self.advisor.observe(r.task, r.device, bucket, r.mean_s, r.dn, energy, size=2**r.sb)
                self.log.ran(r.task, r.device, bucket, r.mean_s, r.dn, energy)
                ran.setdefault(r.task, {}).setdefault(r.device, 0)
                ran[r.task][r.device] += r.dn
            for task, counts in ran.items():
                self.advisor.set_current(task, max(counts, key=lambda d: counts[d]))
            self.advice = {}
            for task in self.advisor.task_names():
                a = self.advisor.decide(task)
                if a is None:
                    continue
                if self.mode == "auto":
                    self._apply(a)
                else:
                    self.advice[task] = a
            tasks = self.advisor.entries()
            clients = len(self.control.clients) if self.control else 0
            # Tasks it learnt, and no task probe left to learn from (`d` removed it, or
            # it is off): "running" read as if it still learnt (issue 74's newcomer).
            probed = any(
                p.name == TASK_PROBE_NAME and p.state in ("pending", "attached")
                for p in snap.probes
            )
            state = "learning" if not tasks else "running" if probed else "idle"
            idle = "no task probe on: nothing new is learnt (a adds one); " if tasks else ""
            return PlacementPart(
                tasks=tasks,
                advice=tuple(a.entry() for a in self.advice.values()),
                advisor=AdvisorState(
                    state=state,
                    mode=self.mode,
                    objective=self.advisor.objective,
                    detail=(idle if not probed else "")
                    + f"{len(tasks)} tasks, {clients} application(s) connected"
                    + (f"; {self.prior}" if self.prior else "")
                    + (
                        f"; on the device's clock: {', '.join(sorted(self.device_clocked))}"
                        if self.device_clocked
                        else ""
                    ),
                    moves=self.log.moves(),
                ),
            )

    def _runs(self, snap: Snapshot) -> list[_Run]:
        """The task rows' runs since the last snapshot, each with its mean time."""
        runs = []
        for p in snap.probes:
            if p.name != TASK_PROBE_NAME or not isinstance(p.key, str):
                continue
            parsed = parse_key(p.key)
            if parsed is None or p.mean_ns is None:
                continue
            task, device, sb, fb = parsed
            count = p.count
            total = p.mean_ns * count
            prev = self.seen.setdefault(p.key, _Seen())
            dn, dt = count - prev.count, total - prev.total_ns
            prev.count, prev.total_ns = count, total
            mid_ns = interval_median_ns(p, prev)
            if dn <= 0 or dt <= 0:
                continue
            mean_s = dt / dn / 1e9
            if dn < FEW_RUNS and mid_ns:
                # A few runs (an exploration) include the data's first upload to that
                # device: their median says more about the steady cost.
                mean_s = mid_ns / 1e9
            runs.append(_Run(task, device, sb, fb, mean_s, dn))
        return runs

    def _on_device_clock(self, runs: list[_Run], gained: dict[str, float]) -> set[str]:
        """Runs on an accelerator of tasks whose kernels the application named, timed by
        the device time those kernels gained (kernel_clock); the tasks so timed."""
        marks = self.control.kernel_marks() if self.control is not None else {}
        clocked = set()
        for task, globs in marks.items():
            there = [r for r in runs if r.task == task and on_accelerator(r.device)]
            if len(there) == 1 and (ns := device_ns(gained, globs)) > 0:
                there[0].mean_s = ns / there[0].dn / 1e9
                clocked.add(task)
        return clocked

    def _apply(self, a: Advice) -> int:
        sent = self.control.push(a.task, a.suggested, a.why, a.runs) if self.control else 0
        context = self.advisor.context(a.task)
        before = self.advisor.predictions(a.task).get(a.current)
        gain = a.energy_gain if self.advisor.objective == "energy" else a.time_gain
        self.advisor.accepted(a)
        move = Move(a.task, a.current, a.suggested, a.explore, sent, t=self._t)
        predicted = None if a.explore or gain is None else round(gain, 4)
        self.log.moved(move, context, before, predicted)
        return sent

    def apply(self, task: str) -> int:
        """Apply the current advice for a task (the TUI's `m`); how many apps were told."""
        with self._lock:
            a = self.advice.pop(task, None)
            if a is None:
                raise LookupError(f"no advice for {task}")
            return self._apply(a)

    def close(self) -> None:
        if self.control is not None:
            self.control.close()
        if self.keep is not None:
            with self._lock:
                self.keep()
