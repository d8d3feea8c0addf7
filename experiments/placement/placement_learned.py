"""The learner (placement/learner.py) driving real executions in placement_eval, in the
shape of its Online runner (--model learner): each call where the learner chooses, each
run's time and energy taught to it. The device it has settled on is the least posterior
mean at the case's input; a call elsewhere is a look."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from adaptyst_top.placement import device_priors as dp
from adaptyst_top.placement.kernels import Inputs, device_kinds
from adaptyst_top.placement.learner import Learner
from adaptyst_top.placement.learner_json import learner_from_json
from adaptyst_top.placement.task_keys import feature_bucket


class Learned:
    def __init__(
        self,
        devices: dict[str, Callable[[Inputs], Any]],
        objective: str,
        meter: Any,
        left_out: int,
        kept: dict[str, Any] | None = None,
    ) -> None:
        """LEFT_OUT: the first executions not counted in the totals (placement_eval's
        FIRST_LEFT_OUT); KEPT: the models an earlier run kept (learner_json), through
        their JSON text as a file would hold them."""
        self.left_out = left_out
        self.devices = devices
        self.meter = meter
        names = sorted(devices, key=lambda d: d != "cpu")  # the CPU first: the reference
        floors = dp.floors_s(names, device_kinds(devices))
        self.learner = Learner(names, objective=objective, floors_s=floors)  # type: ignore[arg-type]
        if kept is not None:
            why = learner_from_json(json.loads(json.dumps(kept)), self.learner)
            if why is not None:
                raise ValueError(why)
        self.times_ms: dict[str, list[float]] = {d: [] for d in devices}
        self.decisions: list[str] = []
        self.total_t = 0.0
        self.total_e = 0.0
        self.runs: list[tuple[str, float, float, bool]] = []
        self.trial: tuple[str, int] | None = None  # the last call was a look
        self.assigned = names[0]
        self.moves = 0
        self.explorations = 0
        self._key = ""
        self._size = 1

    def step(self, task: str, inp: Inputs) -> tuple[str, float, float]:
        self._key, self._size = f"{task}|{feature_bucket(inp.feature)}", inp.size
        dev = self.learner.choose(self._key, inp.size)
        explored = dev != self.assigned and self.learner.calls.get(self._key, 0) > 0
        t, e = self.meter.run(self.devices[dev], inp)
        self.times_ms[dev].append(round(t * 1e3, 3))
        self.runs.append((dev, t, e, explored))
        if len(self.runs) > self.left_out:
            self.total_t += t
            self.total_e += e
        self.learner.observe(self._key, dev, inp.size, t, e)
        self.explorations += explored
        best = self.learner.best(self._key, inp.size) or dev
        if best != self.assigned:
            self.decisions.append(f"{len(self.runs)}: settles on {best}")
            self.assigned = best
            self.moves += 1
        self.trial = (dev, 1) if explored else None
        return dev, t, e

    def predictions(self) -> dict[str, dict[str, Any]]:
        """What it believed when it settled: the why of a miss."""
        out = {}
        for d in self.devices:
            est = self.learner.estimate(self._key, d, self._size)
            m = self.learner.models.get((self._key, d, "t"))
            if est is None or m is None:
                continue
            out[d] = {
                "ms": round(est.time_s * 1e3, 3),
                "j": None if est.energy_j is None else round(est.energy_j, 4),
                "samples": m.n,
                "rel_err": round(est.time_factor - 1, 3),
            }
        return out
