"""DyPe's evaluation method on this machine's devices.

For each case (task x input x objective) every device is measured (the oracle: half
before and half after the online run, in blocks of consecutive runs as when placed
there), then the learner (--model advisor: the advisor it replaced) runs online from
nothing: each execution really runs on the device it chose, is measured, and teaches
the model. Reported: optimal in N cases (its settled device is the
oracle's best, within 1%), the average loss where it is not, both again over the
cases where the oracle's two halves agree on the best device (elsewhere the devices
are within this machine's drift of each other), speedup against always-CPU and
always-accelerator over the same executions, and against the best static device for
each case (in the objective's terms, explorations included), the cumulative regret
per execution against each case's best device (the learning curve), and per input
shift the executions it needs to settle on the new best device and the moves it made.
Totals compare sums with sums: a static device's is its oracle runs' mean times the
executions, and every policy's first execution is left out (FIRST_LEFT_OUT).

    .venv/bin/python -m experiments.placement.placement_eval [--cases FILE] [--json]
        [--rows FILE] [--warm] [--plot FILE] [--gpu-energy] [--model learner|advisor]

Energy: no RAPL on this VM, so energy is an estimate, labelled as such: idle power
times wall time plus per-core power times the process's measured CPU time. With
--gpu-energy, each run adds the NVIDIA GPUs' power from NVML times its wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from adaptyst_top.placement.kernels import (
    Inputs,
    available_devices,
    device_kinds,
    forget_inputs,
    make_inputs,
)
from adaptyst_top.placement.learner_json import learner_to_json
from adaptyst_top.placement.task_keys import feature_bucket, size_bucket
from experiments.placement.baseline.advisor import Advisor
from experiments.placement.baseline.model import model_from_json, model_to_json
from experiments.placement.baseline.stream import TaskStream
from experiments.placement.placement_learned import Learned

Runner = Callable[[Inputs], Any]


class Meter:
    def __init__(
        self, idle_w: float, max_w: float, gpu_power: Callable[[], float] | None = None
    ) -> None:
        self.idle_w = idle_w
        self.core_w = (max_w - idle_w) / (os.cpu_count() or 1)
        self.gpu_power = gpu_power

    def run(self, runner: Runner, inp: Inputs) -> tuple[float, float]:
        c0, t0 = time.process_time(), time.perf_counter()
        runner(inp)
        t = time.perf_counter() - t0
        cpu = time.process_time() - c0
        e = self.idle_w * t + self.core_w * cpu
        if self.gpu_power is not None:
            # The GPU draws whichever device runs the task. Its energy counter moves in
            # steps coarser than a sub-millisecond run (experiments/gpu/gpu_check.py
            # measures the step), so a run is charged the power NVML reads as it ends.
            e += self.gpu_power() * t
        return t, e


def nvml_power() -> Callable[[], float]:
    """Instant power of every NVIDIA GPU, summed (W), as the NVML collector reads it."""
    from adaptyst_top.collectors.devices.nvml import NvmlCollector

    nvml = NvmlCollector()
    if not nvml.gpus:
        raise SystemExit(f"placement_eval: --gpu-energy: {nvml.reason or 'no NVIDIA GPU'}")
    return lambda: sum(nvml.power_w(g) or 0.0 for g in nvml.gpus)


def score(objective: str, t: float, e: float, ref: tuple[float, float]) -> float:
    if objective == "time":
        return t
    if objective == "energy":
        return e
    if objective == "edp":
        return t * e
    return 0.5 * t / ref[0] + 0.5 * e / ref[1]


Samples = dict[str, list[tuple[float, float]]]
Run = tuple[str, float, float, bool]  # device, time, energy, an exploration's run

# Every policy's first execution is left out of its totals (the online run's and each
# static device's alike): it runs cold, before anything is known, and pays for waking
# the machine (a 0.17 ms GEMM took 15 ms here after 0.2 s idle), which would weigh on
# a 60-run case more than any decision does.
FIRST_LEFT_OUT = 1


def regret(objective: str, runs: list[Run], orc: dict[str, tuple[float, float]]) -> list[float]:
    """Cumulative regret after each execution against the oracle's best device, in runs
    of that device (0: as if placed there from the start): what learning cost so far."""
    ref = orc["cpu"]
    best = min(score(objective, *v, ref) for v in orc.values())
    out, total = [], 0.0
    for _dev, t, e, _explore in runs[FIRST_LEFT_OUT:]:
        total += (score(objective, t, e, ref) - best) / best
        out.append(round(total, 3))
    return out


def mean_curve(curves: list[list[float]]) -> list[float]:
    """The cases' curves averaged per execution."""
    return [round(statistics.mean(xs), 3) for xs in zip(*curves, strict=False)] if curves else []


BLOCK = 2  # consecutive runs per device in the oracle, after one unmeasured run


def measure(devices: dict[str, Runner], inp: Inputs, meter: Meter, reps: int) -> Samples:
    """Blocks of consecutive runs per device, as the task runs when placed there (the
    first run of a block, which pays for the switch, is not counted); blocks alternate
    between devices so that each sees the same machine (two cores shared with
    everything else)."""
    samples: Samples = {d: [] for d in devices}
    for _ in range(max(1, reps // BLOCK)):
        for name, run in devices.items():
            run(inp)
            samples[name].extend(meter.run(run, inp) for _ in range(BLOCK))
    return samples


def medians(*parts: Samples) -> dict[str, tuple[float, float]]:
    """Median time and energy per device over every part."""
    out = {}
    for d in parts[0]:
        xs = [x for part in parts for x in part[d]]
        out[d] = (statistics.median(x[0] for x in xs), statistics.median(x[1] for x in xs))
    return out


def means(*parts: Samples) -> dict[str, tuple[float, float]]:
    """Mean time and energy per device over every part: what a static device's runs add
    up to (a run's occasional spike counts in a total as it does in the online run's;
    their medians would leave it out of one side only)."""
    out = {}
    for d in parts[0]:
        xs = [x for part in parts for x in part[d]]
        out[d] = (statistics.fmean(x[0] for x in xs), statistics.fmean(x[1] for x in xs))
    return out


def oracle_best(objective: str, before: Samples, after: Samples) -> tuple[str, bool]:
    """The best device over both halves of the oracle, and whether each half names it
    too: where the halves name different devices, they are within this machine's drift
    of each other (a tie)."""

    def best(m: dict[str, tuple[float, float]]) -> str:
        return min(m, key=lambda d: score(objective, *m[d], m["cpu"]))

    return best(medians(before, after)), len({best(medians(h)) for h in (before, after)}) == 1


class Online:
    """The advisor driving real executions of one task, as the monitor and the task API
    do (placement/stream.py: the device of each call, a decision every few)."""

    def __init__(self, devices: dict[str, Runner], objective: str, meter: Meter) -> None:
        self.devices = devices
        self.meter = meter
        self.advisor = Advisor(list(devices), objective=objective, kinds=device_kinds(devices))  # type: ignore[arg-type]
        self.stream = TaskStream(
            self.advisor, "", "cpu" if "cpu" in devices else next(iter(devices))
        )
        self.times_ms: dict[str, list[float]] = {d: [] for d in devices}
        self.decisions: list[str] = []  # execution: advice, for the --rows file
        self.total_t = 0.0
        self.total_e = 0.0
        # Every execution: (device, time, energy, an exploration's run): the regret curve.
        self.runs: list[tuple[str, float, float, bool]] = []

    @property
    def assigned(self) -> str:
        return self.stream.assigned

    @assigned.setter
    def assigned(self, device: str) -> None:
        self.stream.assigned = device

    @property
    def trial(self) -> tuple[str, int] | None:
        return self.stream.trial

    @property
    def moves(self) -> int:  # real moves (explorations apart)
        return self.stream.moves

    @property
    def explorations(self) -> int:
        return self.stream.explorations

    def step(self, task: str, inp: Inputs) -> tuple[str, float, float]:
        self.stream.task = task
        dev, explored = self.stream.next_device()
        t, e = self.meter.run(self.devices[dev], inp)
        self.times_ms[dev].append(round(t * 1e3, 3))
        self.runs.append((dev, t, e, explored))
        if len(self.runs) > 1:  # the first: see FIRST_LEFT_OUT
            self.total_t += t
            self.total_e += e
        ctx = (size_bucket(inp.size), feature_bucket(inp.feature))
        advice = self.stream.ran(dev, ctx, t, e, inp.size, explored)
        if advice is not None:
            self.decisions.append(f"{sum(map(len, self.times_ms.values()))}: {advice.why}")
        return dev, t, e


# Load: the case file, the meter and this machine's devices.


@dataclass
class Bench:
    """What every case and shift runs on: the case file, the executions each gets, the
    meter, the devices (ACCEL: the accelerator the static figures compare with) and the
    inputs made so far (one per task, size and density, shared by the cases that use it)."""

    spec: dict[str, Any]
    execs: int
    meter: Meter
    devices: dict[str, Runner]
    accel: str
    inputs: dict[tuple[str, int, float], Inputs] = field(default_factory=dict)
    model: str = "learner"  # placement_learned.py; or "advisor" (the one it replaced)

    def online(self, objective: str) -> Any:
        """A fresh online runner of the model under test."""
        if self.model == "learner":
            return Learned(self.devices, objective, self.meter, FIRST_LEFT_OUT)
        return Online(self.devices, objective, self.meter)

    def get(self, task: str, n: int, density: float | None) -> Inputs:
        key = (task, n, density or 0.0)
        if key not in self.inputs:
            self.inputs[key] = make_inputs(task, n, density or 0.01)
        return self.inputs[key]


def load(cases: str, gpu_energy: bool) -> Bench | None:
    """The case file and the devices; None, said on stderr, where no accelerator is."""
    spec = json.loads(Path(cases).read_text())
    execs = int(spec.get("executions", 30))
    pm = spec.get("power_model", {"idle_w": 20.0, "max_w": 120.0})
    meter = Meter(pm["idle_w"], pm["max_w"], nvml_power() if gpu_energy else None)
    devices = available_devices()
    accel = [d for d in devices if d != "cpu"]
    if not accel:
        print("placement_eval: no accelerator device (OpenCL/CUDA) here", file=sys.stderr)
        return None
    return Bench(spec, execs, meter, devices, accel[0])


# The oracle around an online run.

T = TypeVar("T")


def around(bench: Bench, inp: Inputs, run: Callable[[], T]) -> tuple[Samples, T, Samples]:
    """RUN between the oracle's two halves on INP, so that the oracle sees the machine
    the run saw (on a shared VM speeds drift over minutes); the run starts with its
    inputs on no device."""
    before = measure(bench.devices, inp, bench.meter, 8)
    forget_inputs(bench.devices)  # the oracle's copies are not the application's
    result = run()
    after = measure(bench.devices, inp, bench.meter, 8)
    return before, result, after


def loss_of(objective: str, orc: dict[str, tuple[float, float]], device: str, best: str) -> float:
    """What settling on DEVICE loses against the oracle's BEST, in the objective's terms."""
    ref = orc["cpu"]
    return (score(objective, *orc[device], ref) - score(objective, *orc[best], ref)) / score(
        objective, *orc[best], ref
    )


def settled_at(flags: list[bool]) -> int | None:
    """The execution (from 1) from which FLAGS hold to the end; None where the last fails."""
    at = None
    for i, flag in enumerate(flags, 1):
        at = (at or i) if flag else None
    return at


# Online runs: cold from nothing, warm from the models a cold run kept.


def steps(online: Any, task: str, inp: Inputs, executions: int) -> Any:
    for _ in range(executions):
        online.step(task, inp)
    return online


def believed(advisor: Advisor, task: str) -> dict[str, dict[str, Any]]:
    return {
        d: {
            "ms": round(p.time_s * 1e3, 3),
            "j": None if p.energy_j is None else round(p.energy_j, 4),
            "samples": p.samples,
            "rel_err": round(p.rel_err, 3),
        }
        for d, p in advisor.predictions(task).items()
    }


def run_warm(bench: Bench, cold: Any, task: str, objective: str, inp: Inputs) -> Any:
    """The next run of the application: the models kept from COLD, through their JSON as
    the monitor keeps them, are its priors."""
    if isinstance(cold, Learned):
        forget_inputs(bench.devices)
        ours = learner_to_json(cold.learner)
        again = Learned(bench.devices, objective, bench.meter, FIRST_LEFT_OUT, ours)
        return steps(again, task, inp, bench.execs)
    warm = Online(bench.devices, objective, bench.meter)
    kept = [model_from_json(model_to_json(m)) for m in cold.advisor.learned()]
    warm.advisor.preload(m for m in kept if m is not None)
    # What the monitor pushes when the application registers, before its first run.
    warm.assigned = warm.advisor.remembered(task) or warm.assigned
    forget_inputs(bench.devices)
    return steps(warm, task, inp, bench.execs)


@dataclass
class Warm:
    online: Online | Learned
    vs_best: float
    vs_cpu: float
    curve: list[float]
    optimal: bool


@dataclass
class Case:
    """One case's figures: its --rows entry, and what its line and the totals need."""

    row: dict[str, Any]
    orc: dict[str, tuple[float, float]]
    online: Online | Learned
    loss: float
    stable: bool
    vs_best: float
    vs_cpu: float
    speed_cpu: float
    speed_acc: float
    settled_cpu: float
    settled_acc: float
    warm: Warm | None

    @property
    def ok(self) -> bool:
        return bool(self.row["optimal"])


def run_case(bench: Bench, case: dict[str, Any], warm: bool) -> Case:
    task, obj = case["task"], case["objective"]
    inp = bench.get(task, case["n"], case.get("density"))
    before, online, after = around(
        bench, inp, lambda: steps(bench.online(obj), task, inp, bench.execs)
    )
    chosen = online.assigned
    orc = medians(before, after)
    per_run = means(before, after)  # for totals: see means()
    best, stable = oracle_best(obj, before, after)
    learned = (
        online.predictions() if isinstance(online, Learned) else believed(online.advisor, task)
    )
    loss = loss_of(obj, orc, chosen, best)
    ok = loss <= 0.01
    # Including learning, in the objective's own terms, against the device that would
    # have been best for this case had it been chosen from the first run.
    counted = bench.execs - FIRST_LEFT_OUT
    ref = orc["cpu"]
    totals_ref = (counted * ref[0], counted * ref[1])
    static = {d: score(obj, counted * v[0], counted * v[1], totals_ref) for d, v in per_run.items()}
    online_score = score(obj, online.total_t, online.total_e, totals_ref)
    vs_best = min(static.values()) / online_score
    curve = regret(obj, online.runs, per_run)
    w = None
    if warm:
        again = run_warm(bench, online, task, obj, inp)
        warm_score = score(obj, again.total_t, again.total_e, totals_ref)
        w = Warm(
            again,
            min(static.values()) / warm_score,
            static["cpu"] / warm_score,
            regret(obj, again.runs, per_run),
            loss_of(obj, orc, again.assigned, best) <= 0.01,
        )
    row = {
        **case,
        "best": best,
        "chosen": chosen,
        "optimal": ok,
        "oracle_stable": stable,
        "loss_pct": round(100 * loss, 2),
        "vs_best_static_incl_learning": round(vs_best, 3),
        "vs_best_static_incl_learning_warm": round(w.vs_best, 3) if w else None,
        "vs_static_cpu_incl_learning": round(static["cpu"] / online_score, 3),
        "cumulative_regret": round(curve[-1], 3),
        "first_execution_ms": round(online.runs[0][1] * 1e3, 3),
        "moves": online.moves,
        "explorations": online.explorations,
        "oracle_ms": {d: round(v[0] * 1e3, 3) for d, v in orc.items()},
        "oracle_j": {d: round(v[1], 4) for d, v in orc.items()},
        # What the advisor believed when it settled: the why of a miss.
        "learned": learned,
        "online_ms": online.times_ms,
        "decisions": online.decisions,
        "run_devices": [r[0] for r in online.runs],
        "run_explored": [r[3] for r in online.runs],
        "regret": curve,
        **(
            {
                "online_ms_warm": w.online.times_ms,
                "decisions_warm": w.online.decisions,
                "run_devices_warm": [r[0] for r in w.online.runs],
                "run_explored_warm": [r[3] for r in w.online.runs],
                "regret_warm": w.curve,
            }
            if w
            else {}
        ),
    }
    return Case(
        row=row,
        orc=orc,
        online=online,
        loss=loss,
        stable=stable,
        vs_best=vs_best,
        vs_cpu=static["cpu"] / online_score,
        speed_cpu=counted * per_run["cpu"][0] / online.total_t,
        speed_acc=counted * per_run[bench.accel][0] / online.total_t,
        settled_cpu=orc["cpu"][0] / orc[chosen][0],
        settled_acc=orc[bench.accel][0] / orc[chosen][0],
        warm=w,
    )


@dataclass
class Shift:
    """One input shift's figures: its --rows entry, and what its line and the totals need."""

    row: dict[str, Any]
    settled: int
    on_device: int
    moves: int
    explorations: int


def run_shift(bench: Bench, shift: dict[str, Any]) -> Shift:
    task, obj = shift["task"], shift["objective"]
    a = bench.get(task, shift["from"]["n"], shift["from"].get("density"))
    b = bench.get(task, shift["to"]["n"], shift["to"].get("density"))
    after_shift = 3 * bench.execs

    def run() -> tuple[Online, tuple[int, int], list[tuple[str, bool]]]:
        online = steps(bench.online(obj), task, a, bench.execs)
        before_shift = (online.moves, online.explorations)
        states = []  # per execution after the shift: its device, and no exploration under way
        for _ in range(after_shift):
            online.step(task, b)
            states.append((online.assigned, online.trial is None))
        return online, before_shift, states

    # As for a case, the oracle is measured half before and half after the run.
    before_b, (online, (moves0, explorations0), states), after_b = around(bench, b, run)
    orc_b = medians(before_b, after_b)
    best_b, stable_b = oracle_best(obj, before_b, after_b)
    # Settled: from the first execution on which it stays on the new best device (on a
    # tie, where the oracle's halves name different devices: on whichever it ends).
    target = best_b if stable_b else states[-1][0]
    settled = settled_at([dev == target and idle for dev, idle in states])
    # Where it runs, its brief looks elsewhere aside: a learner that keeps looking again
    # now and then (exploration.RELOOK_GROWTH) is settled before its last look.
    on_device = settled_at([dev == target for dev, _idle in states])
    result = Shift(
        row={},
        settled=settled if settled is not None else after_shift,
        on_device=on_device if on_device is not None else after_shift,
        moves=online.moves - moves0,
        explorations=online.explorations - explorations0,
    )
    result.row = {
        **shift,
        "best": best_b,
        "oracle_stable": stable_b,
        "oracle_ms": {d: round(v[0] * 1e3, 3) for d, v in orc_b.items()},
        "settled": result.settled,
        "settled_on_device": result.on_device,
        "decisions": online.decisions,
        "online_ms": online.times_ms,
    }
    return result


# Report: a line per case and shift as they end, then the totals (one JSON line).


def case_line(case: dict[str, Any], c: Case) -> str:
    row, ok = c.row, c.ok
    best, chosen = row["best"], row["chosen"]
    line = (
        f"{case['task']:<7} n={case['n']:<8} {case['objective']:<8} best={best:<9} "
        f"chosen={chosen:<9} {'ok ' if ok else 'MISS'} loss={100 * c.loss:5.1f}%"
        f"{'' if c.stable else ' (tie)'} vs-best-static={c.vs_best:.2f}x  "
        + (f"warm={c.warm.vs_best:.2f}x  " if c.warm else "")
        + "  ".join(f"{d}={v[0] * 1e3:.3f}ms/{v[1]:.3f}J" for d, v in c.orc.items())
    )
    if ok:
        return line
    return (
        line
        + "  learned: "
        + "  ".join(
            f"{d}={x['ms']}ms/{x['j']}J n={x['samples']}" for d, x in row["learned"].items()
        )
        + f"  {chosen if chosen != best else 'others'} ran: "
        + str({d: v[:12] for d, v in c.online.times_ms.items() if d != chosen})
    )


def shift_line(shift: dict[str, Any], s: Shift) -> str:
    return (
        f"shift {shift['task']} {shift['from']['n']}->{shift['to']['n']} "
        f"({shift['objective']}): best after shift {s.row['best']}"
        f"{'' if s.row['oracle_stable'] else ' (tie)'}, "
        f"settled after {s.settled} executions (on the device after {s.on_device}), "
        f"{s.moves} moves, {s.explorations} explorations"
    )


def totals(
    bench: Bench, cases: list[Case], shifts: list[Shift], warm: bool, gpu_energy: bool
) -> dict[str, Any]:
    n = len(cases)
    losses = [c.loss for c in cases if not c.ok]
    stable_losses = [c.loss for c in cases if c.stable and not c.ok]
    vs_best = [c.vs_best for c in cases]
    vs_cpu = [c.vs_cpu for c in cases]
    warm_runs = [c.warm for c in cases if c.warm]
    return {
        "cases": n,
        "optimal": sum(c.ok for c in cases),
        "optimal_pct": round(100 * sum(c.ok for c in cases) / n, 1),
        "avg_loss_pct": round(100 * statistics.mean(losses), 2) if losses else 0.0,
        "avg_loss_all_cases_pct": round(100 * sum(losses) / n, 2),
        # The same over the cases whose oracle named one best device in both halves.
        "oracle_stable_cases": sum(c.stable for c in cases),
        "optimal_of_stable": sum(c.stable and c.ok for c in cases),
        "avg_loss_pct_stable": round(100 * statistics.mean(stable_losses), 2)
        if stable_losses
        else 0.0,
        # Over the settled choice (per execution once learned), and over every execution
        # of the run including the explorations that taught it (short runs pay for them).
        "speedup_vs_static_cpu": round(statistics.geometric_mean(c.settled_cpu for c in cases), 3),
        "speedup_vs_static_accelerator": round(
            statistics.geometric_mean(c.settled_acc for c in cases), 3
        ),
        "speedup_vs_static_cpu_incl_learning": round(
            statistics.geometric_mean(c.speed_cpu for c in cases), 3
        ),
        "speedup_vs_static_accelerator_incl_learning": round(
            statistics.geometric_mean(c.speed_acc for c in cases), 3
        ),
        "accelerator": bench.accel,
        "converge_executions": [s.settled for s in shifts],
        "converge_on_device_executions": [s.on_device for s in shifts],
        # Including learning against the best static device for each case, in the
        # objective's terms (geometric mean, and the worst case).
        "vs_best_static_incl_learning": round(statistics.geometric_mean(vs_best), 3),
        "vs_best_static_incl_learning_min": round(min(vs_best), 3),
        "cases_below_best_static": sum(v < 1.0 for v in vs_best),
        # Never worse than not using the advisor: against always-CPU, objective's terms.
        "vs_static_cpu_incl_learning": round(statistics.geometric_mean(vs_cpu), 3),
        "vs_static_cpu_incl_learning_min": round(min(vs_cpu), 3),
        # Cumulative regret per execution against each case's oracle-best device, in
        # runs of that device, averaged over the cases (the learning curve).
        "regret_per_execution": mean_curve([c.row["regret"] for c in cases]),
        "first_executions_left_out": FIRST_LEFT_OUT,
        **(
            {
                "vs_best_static_incl_learning_warm": round(
                    statistics.geometric_mean(w.vs_best for w in warm_runs), 3
                ),
                "vs_best_static_incl_learning_warm_min": round(
                    min(w.vs_best for w in warm_runs), 3
                ),
                "cases_below_best_static_warm": sum(w.vs_best < 1.0 for w in warm_runs),
                "optimal_warm": sum(w.optimal for w in warm_runs),
                "vs_static_cpu_incl_learning_warm": round(
                    statistics.geometric_mean(w.vs_cpu for w in warm_runs), 3
                ),
                "regret_per_execution_warm": mean_curve([w.curve for w in warm_runs]),
            }
            if warm
            else {}
        ),
        "shift_moves": [s.moves for s in shifts],
        "shift_explorations": [s.explorations for s in shifts],
        "energy_source": "estimate+nvml" if gpu_energy else "estimate",
    }


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cases", default=str(Path(__file__).with_name("placement_cases.json")))
    ap.add_argument("--json", action="store_true", help="end with one JSON line of totals")
    ap.add_argument("--rows", metavar="FILE", help="write every case's figures there (JSON)")
    ap.add_argument(
        "--plot",
        metavar="FILE",
        help="draw the regret curves and each case's decisions there (PNG or SVG; needs "
        "the bench extra: pip install -e '.[bench]')",
    )
    ap.add_argument(
        "--warm",
        action="store_true",
        help="run every case a second time from the models the first run kept (as the "
        "monitor does for an application it has seen), and report that run too",
    )
    ap.add_argument(
        "--model",
        choices=("advisor", "learner"),
        default="learner",
        help="what places the calls: the learner (placement/learner.py, the monitor's, "
        "the default) or the advisor it replaced (placement/advisor.py)",
    )
    ap.add_argument(
        "--gpu-energy",
        action="store_true",
        help="add the NVIDIA GPUs' energy from NVML (power x time) to the CPU estimate",
    )
    return ap.parse_args()


def main() -> int:
    args = parse_args()
    bench = load(args.cases, args.gpu_energy)
    if bench is None:
        return 1
    bench.model = args.model
    cases: list[Case] = []
    for case in bench.spec["cases"]:
        cases.append(run_case(bench, case, args.warm))
        if not args.json:
            print(case_line(case, cases[-1]), flush=True)
    shifts: list[Shift] = []
    for shift in bench.spec.get("shifts", []):
        shifts.append(run_shift(bench, shift))
        if not args.json:
            print(shift_line(shift, shifts[-1]), flush=True)
    result = totals(bench, cases, shifts, args.warm, args.gpu_energy)
    everything = {
        "rows": [c.row for c in cases],
        "shifts": [s.row for s in shifts],
        "totals": result,
    }
    if args.rows:
        Path(args.rows).write_text(json.dumps(everything, indent=1))
    if args.plot:
        # The bench extra's matplotlib, only when asked.
        from experiments.placement.placement_plot import draw

        draw(everything, Path(args.plot), title=Path(args.cases).name)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
