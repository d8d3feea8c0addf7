"""The session's parts of a snapshot: the probes' cost, their target, the launched command,
and a job's nodes where one view merges them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from adaptyst_top.snapshot.codec import JsonPart, json_field


@dataclass(frozen=True, slots=True)
class Overhead(JsonPart):
    """What the probes cost: their share of the target's CPU against the budget."""

    share: float | None  # None until measured
    budget: float  # a fraction of the target's CPU
    calibration: str  # calibrated | pending | default figures (why)


@dataclass(frozen=True, slots=True)
class ProbeTarget(JsonPart):
    """What the probes attach to now: a process and those it started, a Slurm job's
    processes on this node, or every process (pids empty)."""

    name: str  # "PID 4242", "job 42", "every process"
    pids: tuple[int, ...] = field(
        default=(),
        metadata=json_field(check=(lambda pids: all(p > 0 for p in pids), "a list of process IDs")),
    )


@dataclass(frozen=True, slots=True)
class CommandState(JsonPart):
    """The command launched with `-- CMD`."""

    argv: tuple[str, ...]
    pid: int | None
    status: int | None  # as a shell reports it; None while it runs
    output: str | None  # the monitor's private log of its output


NodeStatus = Literal["ok", "connecting", "lost", "unreachable", "refused", "ended"]


@dataclass(frozen=True, slots=True)
class NodeState(JsonPart):
    """One node of a job whose nodes one view merges (`--job` from a login node): whether
    its agent answers through SSH, and why not; `age_s` how old its figures in this
    snapshot are (None: it never gave any)."""

    name: str
    state: NodeStatus
    reason: str | None = field(default=None, metadata=json_field(omit="none"))
    age_s: float | None = field(default=None, metadata=json_field(omit="none"))
