"""The advisor's part of a snapshot: tasks, suggested moves and the moves made."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adaptyst_top.snapshot.reading import Fields, SnapshotError, whole


@dataclass(frozen=True, slots=True)
class TaskEntry:
    """A task the advisor has seen: where it runs and what each device is predicted."""

    task: str
    device: str
    executions: int
    input_bucket: tuple[int, int]  # (log2 size, feature bucket)
    # device -> {"time_s", "energy_j", "samples", "source" (measured | fit | ratio)}
    predicted: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    pareto: tuple[tuple[Any, ...], ...] = ()  # (device, time_s, energy_j) not beaten on both

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "device": self.device,
            "executions": self.executions,
            "input_bucket": list(self.input_bucket),
            "predicted": {d: dict(p) for d, p in self.predicted.items()},
            "pareto": [list(p) for p in self.pareto],
        }

    @classmethod
    def from_json(cls, value: Any) -> TaskEntry:
        d = Fields(value, "task")
        bucket = d.value("input_bucket") or [0, 0]
        pareto = d.value("pareto") or []
        if not (isinstance(bucket, list) and len(bucket) == 2 and all(map(whole, bucket))):
            raise SnapshotError("task: input_bucket is not two integers")
        if not all(isinstance(p, list) for p in pareto):
            raise SnapshotError("task: pareto is not a list of lists")
        return cls(
            task=d.text("task"),
            device=d.text("device"),
            executions=d.integer("executions") or 0,
            input_bucket=(int(bucket[0]), int(bucket[1])),
            predicted=d.mapping("predicted"),
            pareto=tuple(tuple(p) for p in pareto),
        )


@dataclass(frozen=True, slots=True)
class AdviceEntry:
    """A suggested move of a task to another device, and what it should gain."""

    task: str
    current: str
    suggested: str
    time_gain: float | None  # fraction of the current time saved
    energy_gain: float | None
    confidence: float | None  # 0..1
    why: str
    predicted: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    explore: bool = False  # a short exploration, not a settled choice

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "current": self.current,
            "suggested": self.suggested,
            "time_gain": self.time_gain,
            "energy_gain": self.energy_gain,
            "confidence": self.confidence,
            "why": self.why,
            "predicted": {d: dict(p) for d, p in self.predicted.items()},
            "explore": self.explore,
        }

    @classmethod
    def from_json(cls, value: Any) -> AdviceEntry:
        d = Fields(value, "advice")
        return cls(
            task=d.text("task"),
            current=d.text("current"),
            suggested=d.text("suggested"),
            time_gain=d.number("time_gain"),
            energy_gain=d.number("energy_gain"),
            confidence=d.number("confidence"),
            why=d.text("why"),
            predicted=d.mapping("predicted"),
            explore=d.value("explore") is True,
        )


@dataclass(frozen=True, slots=True)
class Move:
    """A move the advisor made (auto mode or `m`); `sent`: applications told."""

    task: str
    source: str  # "from" in JSON
    to: str
    explore: bool
    sent: int

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "from": self.source,
            "to": self.to,
            "explore": self.explore,
            "sent": self.sent,
        }

    @classmethod
    def from_json(cls, value: Any) -> Move:
        d = Fields(value, "move")
        return cls(
            d.text("task"),
            d.text("from"),
            d.text("to"),
            d.value("explore") is True,
            d.integer("sent") or 0,
        )


@dataclass(frozen=True, slots=True)
class AdvisorState:
    state: str  # learning | running
    mode: str  # suggest | auto
    objective: str
    detail: str
    moves: tuple[Move, ...] = ()  # the last few

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "mode": self.mode,
            "objective": self.objective,
            "detail": self.detail,
            "moves": [m.to_json() for m in self.moves],
        }

    @classmethod
    def from_json(cls, value: Any) -> AdvisorState:
        d = Fields(value, "advisor")
        return cls(
            d.text("state"),
            d.text("mode"),
            d.text("objective"),
            d.text("detail"),
            tuple(Move.from_json(m) for m in d.items("moves")),
        )


@dataclass(frozen=True, slots=True)
class PlacementPart:
    """What the advisor adds to a snapshot."""

    tasks: tuple[TaskEntry, ...] = ()
    advice: tuple[AdviceEntry, ...] = ()
    advisor: AdvisorState | None = None
