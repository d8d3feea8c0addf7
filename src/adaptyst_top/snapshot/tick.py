"""The snapshot itself: what one tick of the monitor saw, every part together."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adaptyst_top.snapshot.advice import AdviceEntry, AdvisorState, TaskEntry
from adaptyst_top.snapshot.devices import DeviceReading, SourceState
from adaptyst_top.snapshot.inert import inert
from adaptyst_top.snapshot.parts import CommandState, Overhead, ProbeTarget
from adaptyst_top.snapshot.probes import ProbeEntry
from adaptyst_top.snapshot.reading import Fields, SnapshotError, optional

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class Snapshot:
    t: float  # seconds since the session started
    host: str
    probes: tuple[ProbeEntry, ...] = ()
    devices: tuple[DeviceReading, ...] = ()
    tasks: tuple[TaskEntry, ...] = ()
    advice: tuple[AdviceEntry, ...] = ()
    device_sources: tuple[SourceState, ...] | None = None  # None: devices not read
    overhead: Overhead | None = None  # None: no probe engine
    target: ProbeTarget | None = None  # None: no probe engine
    advisor: AdvisorState | None = None  # None: the advisor is not running
    command: CommandState | None = None  # None: no `-- CMD`
    warnings: tuple[str, ...] = ()  # what happened since the last snapshot, a line each
    target_ended: bool = False  # the target exited
    final: bool = False  # the last snapshot of a run
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "t": self.t,
            "host": self.host,
            "probes": [p.to_json() for p in self.probes],
            "devices": [d.to_json() for d in self.devices],
            "tasks": [t.to_json() for t in self.tasks],
            "advice": [a.to_json() for a in self.advice],
        }
        if self.device_sources is not None:
            out["device_sources"] = [s.to_json() for s in self.device_sources]
        if self.overhead is not None:
            out["overhead"] = self.overhead.to_json()
        if self.target is not None:
            out["target"] = self.target.to_json()
        if self.target_ended:
            out["target_ended"] = True
        if self.advisor is not None:
            out["advisor"] = self.advisor.to_json()
        if self.command is not None:
            out["command"] = self.command.to_json()
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.final:
            out["final"] = True
        out["schema_version"] = self.schema_version
        return out

    @classmethod
    def from_json(cls, value: Any) -> Snapshot:
        """A snapshot read back from a `record` line's JSON; SnapshotError when it is not
        one (a number that is not finite, a list where an object belongs, ...)."""
        d = Fields(value, "snapshot")
        t = d.number("t")
        if t is None:
            raise SnapshotError("snapshot: no time (t)")
        warnings = d.value("warnings") or []
        if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
            raise SnapshotError("snapshot: warnings is not a list of strings")
        sources = d.items("device_sources") if d.value("device_sources") is not None else None
        return cls(
            t=t,
            host=d.text("host"),
            probes=tuple(ProbeEntry.from_json(p) for p in d.items("probes")),
            devices=tuple(DeviceReading.from_json(x) for x in d.items("devices")),
            tasks=tuple(TaskEntry.from_json(x) for x in d.items("tasks")),
            advice=tuple(AdviceEntry.from_json(x) for x in d.items("advice")),
            device_sources=optional(lambda v: tuple(map(SourceState.from_json, v)), sources),
            overhead=optional(Overhead.from_json, d.value("overhead")),
            target=optional(ProbeTarget.from_json, d.value("target")),
            advisor=optional(AdvisorState.from_json, d.value("advisor")),
            command=optional(CommandState.from_json, d.value("command")),
            warnings=tuple(inert(w) for w in warnings),
            target_ended=d.value("target_ended") is True,
            final=d.value("final") is True,
            schema_version=d.integer("schema_version") or 0,
        )
