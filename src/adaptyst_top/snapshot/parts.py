"""The session's parts of a snapshot: the probes' cost, their target, the launched command."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adaptyst_top.snapshot.inert import inert
from adaptyst_top.snapshot.reading import Fields, SnapshotError, whole


@dataclass(frozen=True, slots=True)
class Overhead:
    """What the probes cost: their share of the target's CPU against the budget."""

    share: float | None  # None until measured
    budget: float  # a fraction of the target's CPU
    calibration: str  # calibrated | pending | default figures (why)

    def to_json(self) -> dict[str, Any]:
        return {"share": self.share, "budget": self.budget, "calibration": self.calibration}

    @classmethod
    def from_json(cls, value: Any) -> Overhead:
        d = Fields(value, "overhead")
        return cls(d.number("share"), d.number("budget") or 0.0, d.text("calibration"))


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    """What the probes attach to now: a process and those it started, a Slurm job's
    processes on this node, or every process (pids empty)."""

    name: str  # "PID 4242", "job 42", "every process"
    pids: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "pids": list(self.pids)}

    @classmethod
    def from_json(cls, value: Any) -> ProbeTarget:
        d = Fields(value, "target")
        pids = d.value("pids") or []
        if not isinstance(pids, list) or not all(whole(p) and p > 0 for p in pids):
            raise SnapshotError("target: pids is not a list of process IDs")
        return cls(d.text("name"), tuple(int(p) for p in pids))


@dataclass(frozen=True, slots=True)
class CommandState:
    """The command launched with `-- CMD`."""

    argv: tuple[str, ...]
    pid: int | None
    status: int | None  # as a shell reports it; None while it runs
    output: str | None  # the monitor's private log of its output

    def to_json(self) -> dict[str, Any]:
        return {
            "argv": list(self.argv),
            "pid": self.pid,
            "status": self.status,
            "output": self.output,
        }

    @classmethod
    def from_json(cls, value: Any) -> CommandState:
        d = Fields(value, "command")
        argv = d.value("argv")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise SnapshotError("command: argv is not a list of strings")
        return cls(
            tuple(inert(a) for a in argv),
            d.integer("pid"),
            d.integer("status"),
            d.opt_text("output"),
        )
