"""The snapshot itself: what one tick of the monitor saw, every part together."""

from __future__ import annotations

from dataclasses import dataclass, field

from adaptyst_top.snapshot.advice import AdviceEntry, AdvisorState, TaskEntry
from adaptyst_top.snapshot.codec import JsonPart, json_field
from adaptyst_top.snapshot.devices import DeviceReading, SourceState
from adaptyst_top.snapshot.parts import CommandState, NodeState, Overhead, ProbeTarget
from adaptyst_top.snapshot.probes import EnergySplit, ProbeEntry
from adaptyst_top.snapshot.profile import ProfilePart

SCHEMA_VERSION = 1
_NONE = json_field(omit="none")  # a part written only when there is one
_SET = json_field(omit="empty")  # a flag or list written only when set


@dataclass(frozen=True, slots=True)
class Snapshot(JsonPart):
    """Read back with `Snapshot.from_json` from a `record` line's JSON; SnapshotError
    when it is not one (a number that is not finite, a list where an object belongs)."""

    t: float = field(metadata=json_field(required=True))  # seconds since the session started
    host: str
    probes: tuple[ProbeEntry, ...] = ()
    # Each device's energy against what its probe rows were charged (probe_energy.py).
    energy_split: tuple[EnergySplit, ...] = field(default=(), metadata=_SET)
    devices: tuple[DeviceReading, ...] = ()
    tasks: tuple[TaskEntry, ...] = ()
    advice: tuple[AdviceEntry, ...] = ()
    device_sources: tuple[SourceState, ...] | None = field(default=None, metadata=_NONE)
    overhead: Overhead | None = field(default=None, metadata=_NONE)  # None: no probe engine
    target: ProbeTarget | None = field(default=None, metadata=_NONE)  # None: no probe engine
    target_ended: bool = field(default=False, metadata=_SET)  # the target exited
    advisor: AdvisorState | None = field(default=None, metadata=_NONE)  # None: not running
    command: CommandState | None = field(default=None, metadata=_NONE)  # None: no `-- CMD`
    profile: ProfilePart | None = field(default=None, metadata=_NONE)  # None: no --profile
    # What happened since the last snapshot, a line each.
    warnings: tuple[str, ...] = field(default=(), metadata=_SET)
    final: bool = field(default=False, metadata=_SET)  # the last snapshot of a run
    # A job's nodes, where one view merges them (its rows' parts say each one's node).
    nodes: tuple[NodeState, ...] = field(default=(), metadata=_SET)
    # A recording made before the field existed is of version 0.
    schema_version: int = field(default=SCHEMA_VERSION, metadata=json_field(missing=0))
