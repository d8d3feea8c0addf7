"""The snapshot: what one tick of the monitor saw, typed and versioned.

This module is the contract between the layers (and the format of `record` files):
the probe engine, the device collectors, the advisor and the session each build their
part; every consumer (the TUI, `record`, the advisor) reads attributes. Nobody changes
another layer's part: a snapshot and its entries are frozen, and a part added later
(the advisor's, the launched command's) makes a new snapshot with `dataclasses.replace`.

`to_json()` gives the JSON object of a `record` line, field for field as before the
types existed; `Snapshot.from_json()` reads one back, refusing (with `SnapshotError`)
anything that is not a well-formed snapshot. Fields may be added; none is removed or
changes meaning. Numbers are finite or None; None means unknown, never zero.
docs/data-flow.md describes each field with an example.

Each part lives in a module of its own (probes, devices, parts, advice, tick) and is
declared once: its JSON, written and read back checked, comes from that declaration
(codec); every name is imported from here.

Schema versions: 0 is a recording made before the field existed (no `schema_version`,
no probe `group`); 1 adds both. A newer version is read for the fields this one knows.
"""

from adaptyst_top.snapshot.advice import (
    AdviceEntry,
    AdvisorState,
    Curve,
    Move,
    PlacementPart,
    TaskEntry,
)
from adaptyst_top.snapshot.codec import SnapshotError
from adaptyst_top.snapshot.devices import (
    DeviceKind,
    DeviceReading,
    EnergyMethod,
    EnergyReading,
    EnergySource,
    SourceState,
    SourceStatus,
)
from adaptyst_top.snapshot.parts import CommandState, NodeState, Overhead, ProbeTarget
from adaptyst_top.snapshot.probes import (
    LATENCY_FIELDS,
    NO_LATENCY,
    EnergySplit,
    Latency,
    ProbeEntry,
    ProbeKey,
    ProbeKind,
    ProbeRef,
    ProbeState,
    ProcessPart,
)
from adaptyst_top.snapshot.profile import ProfileFunction, ProfilePart, ProfileStack
from adaptyst_top.snapshot.tick import SCHEMA_VERSION, Snapshot
from adaptyst_top.snapshot.value_readers import reusing

__all__ = [
    "LATENCY_FIELDS",
    "NO_LATENCY",
    "SCHEMA_VERSION",
    "AdviceEntry",
    "AdvisorState",
    "CommandState",
    "Curve",
    "DeviceKind",
    "DeviceReading",
    "EnergyMethod",
    "EnergyReading",
    "EnergySource",
    "EnergySplit",
    "Latency",
    "Move",
    "NodeState",
    "Overhead",
    "PlacementPart",
    "ProbeEntry",
    "ProbeKey",
    "ProbeKind",
    "ProbeRef",
    "ProbeState",
    "ProbeTarget",
    "ProcessPart",
    "ProfileFunction",
    "ProfilePart",
    "ProfileStack",
    "Snapshot",
    "SnapshotError",
    "SourceState",
    "SourceStatus",
    "TaskEntry",
    "reusing",
]
