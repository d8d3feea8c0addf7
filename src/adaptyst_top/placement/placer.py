"""What the monitor's placement loop (loop.py) asks of whoever places its tasks: the
learner (learned_advisor.py), or, in the evaluations, the advisor it replaced
(experiments/placement/baseline/)."""

from __future__ import annotations

from typing import Protocol

from adaptyst_top.placement.advice import Advice
from adaptyst_top.placement.objectives import Objective
from adaptyst_top.placement.prediction import Context, Prediction
from adaptyst_top.snapshot import TaskEntry


class Placer(Protocol):
    objective: Objective

    def observe(
        self,
        task: str,
        device: str,
        ctx: Context,
        time_s: float,
        count: int = 1,
        energy_j: float | None = None,
        size: int | None = None,
    ) -> None: ...

    def set_current(self, task: str, device: str) -> None: ...

    def decide(self, task: str) -> Advice | None: ...

    def accepted(self, advice: Advice) -> None: ...

    def predictions(self, task: str) -> dict[str, Prediction]: ...

    def cost(self, p: Prediction, ref: Prediction) -> float: ...

    def task_names(self) -> list[str]: ...

    def context(self, task: str) -> Context: ...

    def unplaced(self) -> list[str]: ...

    def remembered(self, task: str) -> str | None: ...

    def entries(self) -> tuple[TaskEntry, ...]: ...
