"""The moves the advisor made, each with the gain it predicted and the gain measured over
the task's runs after it on the same input: what makes a user trust the next one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from adaptyst_top.placement.prediction import Context, Prediction
from adaptyst_top.snapshot import Move

KEPT = 20  # the last moves a snapshot carries


@dataclass
class _Record:
    move: Move
    context: Context
    before: Prediction | None  # the device left, on this input, when the task moved
    time_s: float = 0.0  # sums over the runs after the move, there, on this input
    energy_j: float = 0.0
    energy_runs: int = 0
    runs: int = 0


class MoveLog:
    def __init__(self, cost: Callable[[Prediction, Prediction], float]) -> None:
        """cost: a prediction's cost in the objective's terms against the one before."""
        self.cost = cost
        self._records: list[_Record] = []

    def moved(
        self, move: Move, context: Context, before: Prediction | None, gain: float | None
    ) -> None:
        self._records.append(_Record(replace(move, predicted_gain=gain), context, before))
        del self._records[:-KEPT]  # bounded, however long the run

    def ran(
        self,
        task: str,
        device: str,
        context: Context,
        mean_s: float,
        runs: int,
        energy_j: float | None,
    ) -> None:
        """RUNS executions of TASK on DEVICE, MEAN_S each: counted for the task's last
        move when they are where it went and on the input it moved for."""
        last = next((r for r in reversed(self._records) if r.move.task == task), None)
        if last is None or last.move.to != device or last.context != context:
            return
        last.time_s += mean_s * runs
        last.runs += runs
        if energy_j is not None:
            last.energy_j += energy_j * runs
            last.energy_runs += runs

    def moves(self) -> tuple[Move, ...]:
        return tuple(self._entry(r) for r in self._records)

    def _entry(self, r: _Record) -> Move:
        if r.before is None or r.runs == 0:
            return replace(r.move, runs=r.runs)
        energy = r.energy_j / r.energy_runs if r.energy_runs else None
        after = Prediction(r.time_s / r.runs, energy, 0.0, r.runs, "measured")
        before = r.before
        if (before.energy_j is None) != (energy is None):  # compared on time alone
            before, after = replace(before, energy_j=None), replace(after, energy_j=None)
        was = self.cost(before, before)
        gain = (was - self.cost(after, before)) / was if was > 0 else None
        return replace(r.move, measured_gain=None if gain is None else round(gain, 4), runs=r.runs)
