"""The advisor's part of a snapshot: tasks, suggested moves and the moves made."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adaptyst_top.snapshot.codec import JsonPart, json_field

_NONE = json_field(omit="none")  # added after the first version that wrote the part:
_SET = json_field(omit="empty")  # left out unset, so what that version wrote is unchanged


@dataclass(frozen=True, slots=True)
class Curve(JsonPart):
    """What a device's runs of a task cost by input size: the measured means and the
    fitted t(n) = a*n^b + c (None until enough sizes ran)."""

    device: str
    points: tuple[tuple[float, float], ...] = ()  # (input size, seconds per run)
    fit: tuple[float, float, float] | None = field(default=None, metadata=_NONE)
    # The learner's prediction over the sizes seen: (input size, median seconds per run,
    # the factor either way that holds one sigma), instead of a fit.
    band: tuple[tuple[float, float, float], ...] = field(default=(), metadata=_SET)


@dataclass(frozen=True, slots=True)
class TaskEntry(JsonPart):
    """A task the advisor has seen: where it runs and what each device is predicted."""

    task: str
    device: str
    executions: int
    input_bucket: tuple[int, int]  # (log2 size, feature bucket)
    # device -> {"time_s", "energy_j", "samples", "source" (measured | fit | ratio),
    # and from the learner "time_factor", "energy_factor": one sigma either way}
    predicted: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    pareto: tuple[tuple[Any, ...], ...] = ()  # (device, time_s, energy_j) not beaten on both
    best: str = field(default="", metadata=_SET)  # the device the models say, for the objective
    gain: float | None = field(default=None, metadata=_NONE)  # best over current, objective's terms
    confidence: float | None = field(default=None, metadata=_NONE)  # 0..1, of that gain
    state: str = field(default="", metadata=_SET)  # learning | exploring | settled
    size: int | None = field(default=None, metadata=_NONE)  # the current input's size
    curves: tuple[Curve, ...] = field(default=(), metadata=_SET)  # a device each


@dataclass(frozen=True, slots=True)
class AdviceEntry(JsonPart):
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


@dataclass(frozen=True, slots=True)
class Move(JsonPart):
    """A move the advisor made (auto mode or `m`); `sent`: applications told."""

    task: str
    source: str = field(metadata=json_field(name="from"))
    to: str
    explore: bool
    sent: int
    t: float | None = field(default=None, metadata=_NONE)  # the snapshot's time at the move
    # The gain (objective's terms, a fraction of the cost before) predicted when moving,
    # and the one measured over the runs after it on the same input (`runs` of them).
    predicted_gain: float | None = field(default=None, metadata=_NONE)
    measured_gain: float | None = field(default=None, metadata=_NONE)
    runs: int = field(default=0, metadata=_SET)


@dataclass(frozen=True, slots=True)
class AdvisorState(JsonPart):
    state: str  # learning | running | idle (tasks learnt, no task probe on)
    mode: str  # suggest | auto
    objective: str
    detail: str
    moves: tuple[Move, ...] = ()  # the last few


@dataclass(frozen=True, slots=True)
class PlacementPart:
    """What the advisor adds to a snapshot."""

    tasks: tuple[TaskEntry, ...] = ()
    advice: tuple[AdviceEntry, ...] = ()
    advisor: AdvisorState | None = None
