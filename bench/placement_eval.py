"""DyPe's evaluation method on this machine's devices.

For each case (task x input x objective) every device is measured (the oracle), then
the advisor runs online from nothing: each execution really runs on the device it
assigned, is measured, and teaches the model; explorations are bounded the same way
as in the monitor. Reported: optimal in N cases (its settled device is the oracle's
best, within 1%), the average loss where it is not, speedup against always-CPU and
always-accelerator over the same executions, and the executions it needs to settle
on the new best device after an input shift.

    .venv/bin/python bench/placement_eval.py [--cases FILE] [--json]

Energy: no RAPL on this VM, so energy is an estimate, labelled as such: idle power
times wall time plus per-core power times the process's measured CPU time.
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

from adaptyst_top.placement.advisor import EXPLORE_RUNS, Advisor  # noqa: E402
from adaptyst_top.placement.kernels import Inputs, available_devices, make_inputs  # noqa: E402
from adaptyst_top.placement.task_api import feature_bucket, size_bucket  # noqa: E402

Runner = Callable[[Inputs], Any]
DECIDE_EVERY = 5  # executions per decision: the monitor decides once per interval


class Meter:
    def __init__(self, idle_w: float, max_w: float) -> None:
        self.idle_w = idle_w
        self.core_w = (max_w - idle_w) / (os.cpu_count() or 1)

    def run(self, runner: Runner, inp: Inputs) -> tuple[float, float]:
        c0, t0 = time.process_time(), time.perf_counter()
        runner(inp)
        t = time.perf_counter() - t0
        cpu = time.process_time() - c0
        return t, self.idle_w * t + self.core_w * cpu


def score(objective: str, t: float, e: float, ref: tuple[float, float]) -> float:
    if objective == "time":
        return t
    if objective == "energy":
        return e
    if objective == "edp":
        return t * e
    return 0.5 * t / ref[0] + 0.5 * e / ref[1]


def oracle(
    devices: dict[str, Runner], inp: Inputs, meter: Meter, reps: int = 15
) -> dict[str, tuple[float, float]]:
    """Median time and energy per device. Reps alternate between devices so that both
    see the same machine (two cores shared with everything else)."""
    for run in devices.values():
        run(inp)  # warm: buffers on the device, code compiled
    samples: dict[str, list[tuple[float, float]]] = {d: [] for d in devices}
    for _ in range(reps):
        for name, run in devices.items():
            samples[name].append(meter.run(run, inp))
    return {
        d: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
        for d, v in samples.items()
    }


class Online:
    """The advisor driving real executions, as the monitor and the task API do."""

    def __init__(self, devices: dict[str, Runner], objective: str, meter: Meter) -> None:
        self.devices = devices
        self.meter = meter
        self.advisor = Advisor(list(devices), objective=objective)  # type: ignore[arg-type]
        self.assigned = "cpu" if "cpu" in devices else next(iter(devices))
        self.trial: tuple[str, int] | None = None
        self.window: dict[str, int] = {}

    def step(self, task: str, inp: Inputs) -> tuple[str, float, float]:
        if self.trial is not None:
            dev, left = self.trial
            self.trial = (dev, left - 1) if left > 1 else None
        else:
            dev = self.assigned
        t, e = self.meter.run(self.devices[dev], inp)
        ctx = (size_bucket(inp.size), feature_bucket(inp.feature))
        self.advisor.observe(task, dev, ctx, t, 1, e, size=inp.size)
        self.window[dev] = self.window.get(dev, 0) + 1
        if sum(self.window.values()) >= DECIDE_EVERY:
            self.advisor.set_current(task, max(self.window, key=lambda d: self.window[d]))
            self.window = {}
            advice = self.advisor.decide(task)
            if advice is not None:
                self.advisor.accepted(advice)
                if advice.explore:
                    self.trial = (advice.suggested, advice.runs or EXPLORE_RUNS)
                else:
                    self.assigned = advice.suggested
        return dev, t, e


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cases", default=str(Path(__file__).with_name("placement_cases.json")))
    ap.add_argument("--json", action="store_true", help="end with one JSON line of totals")
    args = ap.parse_args()
    spec = json.loads(Path(args.cases).read_text())
    execs = int(spec.get("executions", 30))
    pm = spec.get("power_model", {"idle_w": 20.0, "max_w": 120.0})
    meter = Meter(pm["idle_w"], pm["max_w"])
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
    speed_cpu: list[float] = []
    speed_acc: list[float] = []
    settled_cpu: list[float] = []
    settled_acc: list[float] = []
    for case in spec["cases"]:
        inp = get(case["task"], case["n"], case.get("density"))
        orc = oracle(devices, inp, meter)
        ref = orc["cpu"]
        obj = case["objective"]
        best = min(orc, key=lambda d: score(obj, *orc[d], ref))
        online = Online(devices, obj, meter)
        total_t = 0.0
        for _ in range(execs):
            _dev, t, _e = online.step(case["task"], inp)
            total_t += t
        chosen = online.assigned
        loss = (score(obj, *orc[chosen], ref) - score(obj, *orc[best], ref)) / score(
            obj, *orc[best], ref
        )
        ok = loss <= 0.01
        optimal += ok
        if not ok:
            losses.append(loss)
        speed_cpu.append(execs * orc["cpu"][0] / total_t)
        speed_acc.append(execs * orc[accel[0]][0] / total_t)
        settled_cpu.append(orc["cpu"][0] / orc[chosen][0])
        settled_acc.append(orc[accel[0]][0] / orc[chosen][0])
        rows.append(
            {
                **case,
                "best": best,
                "chosen": chosen,
                "optimal": ok,
                "loss_pct": round(100 * loss, 2),
                "oracle_ms": {d: round(v[0] * 1e3, 3) for d, v in orc.items()},
                "oracle_j": {d: round(v[1], 4) for d, v in orc.items()},
            }
        )
        if not args.json:
            print(
                f"{case['task']:<7} n={case['n']:<8} {obj:<8} best={best:<9} chosen={chosen:<9} "
                f"{'ok ' if ok else 'MISS'} loss={100 * loss:5.1f}%  "
                + "  ".join(f"{d}={v[0] * 1e3:.3f}ms/{v[1]:.3f}J" for d, v in orc.items()),
                flush=True,
            )

    converge: list[int] = []
    for shift in spec.get("shifts", []):
        obj = shift["objective"]
        a = get(shift["task"], shift["from"]["n"], shift["from"].get("density"))
        b = get(shift["task"], shift["to"]["n"], shift["to"].get("density"))
        orc_b = oracle(devices, b, meter)
        best_b = min(orc_b, key=lambda d: score(obj, *orc_b[d], orc_b["cpu"]))
        online = Online(devices, obj, meter)
        for _ in range(execs):
            online.step(shift["task"], a)
        settled = None
        for i in range(1, 3 * execs + 1):
            online.step(shift["task"], b)
            on_best = online.assigned == best_b and online.trial is None
            # The first execution from which it stays on the new best device.
            settled = (settled or i) if on_best else None
        converge.append(settled if settled is not None else 3 * execs)
        if not args.json:
            print(
                f"shift {shift['task']} {shift['from']['n']}->{shift['to']['n']} ({obj}): "
                f"best after shift {best_b}, settled after {converge[-1]} executions",
                flush=True,
            )

    n = len(spec["cases"])
    totals = {
        "cases": n,
        "optimal": optimal,
        "optimal_pct": round(100 * optimal / n, 1),
        "avg_loss_pct": round(100 * statistics.mean(losses), 2) if losses else 0.0,
        "avg_loss_all_cases_pct": round(100 * sum(losses) / n, 2),
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
        "energy_source": "estimate",
    }
    print(json.dumps(totals))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
