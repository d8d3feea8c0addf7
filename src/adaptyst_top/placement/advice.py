"""One piece of advice for a task: a move or an exploration, with the predictions and
the reason behind it, as the advisor gives it and the snapshot carries it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adaptyst_top.snapshot import AdviceEntry


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
