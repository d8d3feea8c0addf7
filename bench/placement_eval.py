"""DyPe's evaluation method on this machine's devices.

For each case (task x input x objective) every device is measured (the oracle: half
before and half after the online run, in blocks of consecutive runs as when placed
there), then the advisor runs online from nothing: each execution really runs on the
device it assigned, is measured, and teaches the model; explorations are bounded the
same way as in the monitor. Reported: optimal in N cases (its settled device is the
oracle's best, within 1%), the average loss where it is not, both again over the
cases where the oracle's two halves agree on the best device (elsewhere the devices
are within this machine's drift of each other), speedup against always-CPU and
always-accelerator over the same executions, and against the best static device for
each case (in the objective's terms, explorations included), the cumulative regret
per execution against each case's best device (the learning curve), and per input
shift the executions it needs to settle on the new best device and the moves it made.
Totals compare sums with sums: a static device's is its oracle runs' mean times the
executions, and every policy's first execution is left out (FIRST_LEFT_OUT).

    .venv/bin/python bench/placement_eval.py [--cases FILE] [--json] [--rows FILE]
        [--warm] [--plot FILE]

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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adaptyst_top.placement.advisor import Advisor  # noqa: E402
from adaptyst_top.placement.kernels import (  # noqa: E402
    Inputs,
    available_devices,
    device_kinds,
    forget_inputs,
    make_inputs,
)
from adaptyst_top.placement.model import model_from_json, model_to_json  # noqa: E402
from adaptyst_top.placement.stream import TaskStream  # noqa: E402
from adaptyst_top.placement.task_keys import feature_bucket, size_bucket  # noqa: E402

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
            # steps coarser than a sub-millisecond run (bench/gpu_check.py measures the
            # step), so a run is charged the power NVML reads as it ends.
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


def main() -> int:
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
        "--gpu-energy",
        action="store_true",
        help="add the NVIDIA GPUs' energy from NVML (power x time) to the CPU estimate",
    )
    args = ap.parse_args()
    spec = json.loads(Path(args.cases).read_text())
    execs = int(spec.get("executions", 30))
    pm = spec.get("power_model", {"idle_w": 20.0, "max_w": 120.0})
    meter = Meter(pm["idle_w"], pm["max_w"], nvml_power() if args.gpu_energy else None)
    devices = available_devices()
    accel = [d for d in devices if d != "cpu"]
    if not accel:
        print("placement_eval: no accelerator device (OpenCL/CUDA) here", file=sys.stderr)
        return 1
    inputs: dict[tuple[str, int, float], Inputs] = {}

    def get(task: str, n: int, density: float | None) -> Inputs:
        key = (task, n, density or 0.0)
        if key not in inputs:
            inputs[key] = make_inputs(task, n, density or 0.01)
        return inputs[key]

    rows = []
    optimal = 0
    losses: list[float] = []
    stable_cases, stable_optimal, stable_losses = 0, 0, []
    vs_best: list[float] = []
    speed_cpu: list[float] = []
    speed_acc: list[float] = []
    settled_cpu: list[float] = []
    settled_acc: list[float] = []
    vs_best_warm: list[float] = []
    warm_optimal = 0
    vs_cpu: list[float] = []
    vs_cpu_warm: list[float] = []
    curves: list[list[float]] = []
    curves_warm: list[list[float]] = []
    for case in spec["cases"]:
        inp = get(case["task"], case["n"], case.get("density"))
        obj = case["objective"]
        # The oracle is measured half before and half after the online run, so that it
        # sees the machine the online run saw (on a shared VM speeds drift over minutes).
        before = measure(devices, inp, meter, 8)
        forget_inputs(devices)  # the oracle's copies are not the application's
        online = Online(devices, obj, meter)
        for _ in range(execs):
            online.step(case["task"], inp)
        total_t = online.total_t
        chosen = online.assigned
        after = measure(devices, inp, meter, 8)
        orc = medians(before, after)
        per_run = means(before, after)  # for totals: see means()
        ref = orc["cpu"]
        best, stable = oracle_best(obj, before, after)
        learned = online.advisor.predictions(case["task"])
        loss = (score(obj, *orc[chosen], ref) - score(obj, *orc[best], ref)) / score(
            obj, *orc[best], ref
        )
        ok = loss <= 0.01
        optimal += ok
        if not ok:
            losses.append(loss)
        if stable:
            stable_cases += 1
            stable_optimal += ok
            if not ok:
                stable_losses.append(loss)
        # Including learning, in the objective's own terms, against the device that
        # would have been best for this case had it been chosen from the first run.
        counted = execs - 1  # FIRST_LEFT_OUT
        totals_ref = (counted * ref[0], counted * ref[1])
        static = {
            d: score(obj, counted * v[0], counted * v[1], totals_ref) for d, v in per_run.items()
        }
        online_score = score(obj, online.total_t, online.total_e, totals_ref)
        vs_best.append(min(static.values()) / online_score)
        vs_cpu.append(static["cpu"] / online_score)
        curve = regret(obj, online.runs, per_run)
        curves.append(curve)
        if args.warm:
            # The next run of the application: the models kept from this one, through
            # their JSON as the monitor keeps them, are its priors.
            warm = Online(devices, obj, meter)
            kept = [model_from_json(model_to_json(m)) for m in online.advisor.learned()]
            warm.advisor.preload(m for m in kept if m is not None)
            # What the monitor pushes when the application registers, before its first run.
            warm.assigned = warm.advisor.remembered(case["task"]) or warm.assigned
            forget_inputs(devices)
            for _ in range(execs):
                warm.step(case["task"], inp)
            warm_score = score(obj, warm.total_t, warm.total_e, totals_ref)
            vs_best_warm.append(min(static.values()) / warm_score)
            vs_cpu_warm.append(static["cpu"] / warm_score)
            curves_warm.append(regret(obj, warm.runs, per_run))
            warm_loss = (score(obj, *orc[warm.assigned], ref) - score(obj, *orc[best], ref)) / (
                score(obj, *orc[best], ref)
            )
            warm_optimal += warm_loss <= 0.01
        speed_cpu.append(counted * per_run["cpu"][0] / total_t)
        speed_acc.append(counted * per_run[accel[0]][0] / total_t)
        settled_cpu.append(orc["cpu"][0] / orc[chosen][0])
        settled_acc.append(orc[accel[0]][0] / orc[chosen][0])
        rows.append(
            {
                **case,
                "best": best,
                "chosen": chosen,
                "optimal": ok,
                "oracle_stable": stable,
                "loss_pct": round(100 * loss, 2),
                "vs_best_static_incl_learning": round(vs_best[-1], 3),
                "vs_best_static_incl_learning_warm": round(vs_best_warm[-1], 3)
                if args.warm
                else None,
                "vs_static_cpu_incl_learning": round(vs_cpu[-1], 3),
                "cumulative_regret": round(curve[-1], 3),
                "first_execution_ms": round(online.runs[0][1] * 1e3, 3),
                "moves": online.moves,
                "explorations": online.explorations,
                "oracle_ms": {d: round(v[0] * 1e3, 3) for d, v in orc.items()},
                "oracle_j": {d: round(v[1], 4) for d, v in orc.items()},
                # What the advisor believed when it settled: the why of a miss.
                "learned": {
                    d: {
                        "ms": round(p.time_s * 1e3, 3),
                        "j": None if p.energy_j is None else round(p.energy_j, 4),
                        "samples": p.samples,
                        "rel_err": round(p.rel_err, 3),
                    }
                    for d, p in learned.items()
                },
                "online_ms": online.times_ms,
                "decisions": online.decisions,
                "run_devices": [r[0] for r in online.runs],
                "run_explored": [r[3] for r in online.runs],
                "regret": curve,
                **(
                    {
                        "online_ms_warm": warm.times_ms,
                        "decisions_warm": warm.decisions,
                        "run_devices_warm": [r[0] for r in warm.runs],
                        "run_explored_warm": [r[3] for r in warm.runs],
                        "regret_warm": curves_warm[-1],
                    }
                    if args.warm
                    else {}
                ),
            }
        )
        if not args.json:
            print(
                f"{case['task']:<7} n={case['n']:<8} {obj:<8} best={best:<9} chosen={chosen:<9} "
                f"{'ok ' if ok else 'MISS'} loss={100 * loss:5.1f}%{'' if stable else ' (tie)'} "
                f"vs-best-static={vs_best[-1]:.2f}x  "
                + (f"warm={vs_best_warm[-1]:.2f}x  " if args.warm else "")
                + ""
                + "  ".join(f"{d}={v[0] * 1e3:.3f}ms/{v[1]:.3f}J" for d, v in orc.items())
                + (
                    ""
                    if ok
                    else "  learned: "
                    + "  ".join(
                        f"{d}={x['ms']}ms/{x['j']}J n={x['samples']}"
                        for d, x in rows[-1]["learned"].items()
                    )
                    + f"  {chosen if chosen != best else 'others'} ran: "
                    + str({d: v[:12] for d, v in online.times_ms.items() if d != chosen})
                ),
                flush=True,
            )

    converge: list[int] = []
    on_target: list[int] = []
    shift_moves: list[int] = []
    shift_rows: list[dict[str, Any]] = []
    shift_explorations: list[int] = []
    for shift in spec.get("shifts", []):
        obj = shift["objective"]
        a = get(shift["task"], shift["from"]["n"], shift["from"].get("density"))
        b = get(shift["task"], shift["to"]["n"], shift["to"].get("density"))
        # As for a case, the oracle is measured half before and half after the run.
        before_b = measure(devices, b, meter, 8)
        forget_inputs(devices)
        online = Online(devices, obj, meter)
        for _ in range(execs):
            online.step(shift["task"], a)
        moves0, explorations0 = online.moves, online.explorations
        states = []  # per execution after the shift: its device, and no exploration under way
        for _ in range(3 * execs):
            online.step(shift["task"], b)
            states.append((online.assigned, online.trial is None))
        after_b = measure(devices, b, meter, 8)
        orc_b = medians(before_b, after_b)
        best_b, stable_b = oracle_best(obj, before_b, after_b)
        tie = not stable_b
        # Settled: from the first execution on which it stays on the new best device (on
        # a tie, where the oracle's halves name different devices: on whichever it ends).
        target = states[-1][0] if tie else best_b
        settled = None
        for i, (dev, idle) in enumerate(states, 1):
            settled = (settled or i) if dev == target and idle else None
        converge.append(settled if settled is not None else 3 * execs)
        # Where it runs, its brief looks elsewhere aside: a learner that keeps looking
        # again now and then (exploration.RELOOK_GROWTH) is settled before its last look.
        on_device = None
        for i, (dev, _idle) in enumerate(states, 1):
            on_device = (on_device or i) if dev == target else None
        on_target.append(on_device if on_device is not None else 3 * execs)
        shift_moves.append(online.moves - moves0)
        shift_explorations.append(online.explorations - explorations0)
        shift_rows.append(
            {
                **shift,
                "best": best_b,
                "oracle_stable": not tie,
                "oracle_ms": {d: round(v[0] * 1e3, 3) for d, v in orc_b.items()},
                "settled": converge[-1],
                "settled_on_device": on_target[-1],
                "decisions": online.decisions,
                "online_ms": online.times_ms,
            }
        )
        if not args.json:
            print(
                f"shift {shift['task']} {shift['from']['n']}->{shift['to']['n']} ({obj}): "
                f"best after shift {best_b}{'' if not tie else ' (tie)'}, "
                f"settled after {converge[-1]} executions "
                f"(on the device after {on_target[-1]}), "
                f"{shift_moves[-1]} moves, {shift_explorations[-1]} explorations",
                flush=True,
            )

    n = len(spec["cases"])
    totals = {
        "cases": n,
        "optimal": optimal,
        "optimal_pct": round(100 * optimal / n, 1),
        "avg_loss_pct": round(100 * statistics.mean(losses), 2) if losses else 0.0,
        "avg_loss_all_cases_pct": round(100 * sum(losses) / n, 2),
        # The same over the cases whose oracle named one best device in both halves.
        "oracle_stable_cases": stable_cases,
        "optimal_of_stable": stable_optimal,
        "avg_loss_pct_stable": round(100 * statistics.mean(stable_losses), 2)
        if stable_losses
        else 0.0,
        # Over the settled choice (per execution once learned), and over every execution
        # of the run including the explorations that taught it (short runs pay for them).
        "speedup_vs_static_cpu": round(statistics.geometric_mean(settled_cpu), 3),
        "speedup_vs_static_accelerator": round(statistics.geometric_mean(settled_acc), 3),
        "speedup_vs_static_cpu_incl_learning": round(statistics.geometric_mean(speed_cpu), 3),
        "speedup_vs_static_accelerator_incl_learning": round(
            statistics.geometric_mean(speed_acc), 3
        ),
        "accelerator": accel[0],
        "converge_executions": converge,
        "converge_on_device_executions": on_target,
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
        "regret_per_execution": mean_curve(curves),
        "first_executions_left_out": FIRST_LEFT_OUT,
        **(
            {
                "vs_best_static_incl_learning_warm": round(
                    statistics.geometric_mean(vs_best_warm), 3
                ),
                "vs_best_static_incl_learning_warm_min": round(min(vs_best_warm), 3),
                "cases_below_best_static_warm": sum(v < 1.0 for v in vs_best_warm),
                "optimal_warm": warm_optimal,
                "vs_static_cpu_incl_learning_warm": round(
                    statistics.geometric_mean(vs_cpu_warm), 3
                ),
                "regret_per_execution_warm": mean_curve(curves_warm),
            }
            if args.warm
            else {}
        ),
        "shift_moves": shift_moves,
        "shift_explorations": shift_explorations,
        "energy_source": "estimate+nvml" if args.gpu_energy else "estimate",
    }
    everything = {"rows": rows, "shifts": shift_rows, "totals": totals}
    if args.rows:
        Path(args.rows).write_text(json.dumps(everything, indent=1))
    if args.plot:
        from placement_plot import draw  # the bench extra's matplotlib, only when asked

        draw(everything, Path(args.plot), title=Path(args.cases).name)
    print(json.dumps(totals))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
