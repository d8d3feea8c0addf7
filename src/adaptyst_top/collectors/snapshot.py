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

Long on purpose: the contract is read in one place, each type beside its JSON.

Schema versions: 0 is a recording made before the field existed (no `schema_version`,
no probe `group`); 1 adds both. A newer version is read for the fields this one knows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from adaptyst_top.collectors.energy import EnergyReading
from adaptyst_top.collectors.inert import has_unsafe, inert

SCHEMA_VERSION = 1
T = TypeVar("T")

DeviceKind = Literal["cpu", "gpu", "fpga", "opencl"]
ProbeKey = str | int | None  # an @argN value: a string, an integer, or None when unsplit
LATENCY_FIELDS = ("mean_ns", "p50_ns", "p95_ns", "p99_ns", "min_ns", "max_ns")


class SnapshotError(ValueError):
    """A JSON value that is not a snapshot; the message says which part, in one line."""


# ----- probes -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProbeRef:
    """A probe row's one identity, used by the engine, the TUI and removal alike.

    `group` is what one added spec became in the engine (removal takes the whole group);
    `row` the attach point in it (toggling takes the row; None while the spec has none);
    `key` the @argN value the row's statistics are split by. In a recording made before
    schema 1 the group is the spec text."""

    group: int | str
    row: int | None
    key: ProbeKey

    @property
    def text(self) -> str:
        """The identity as one string (a table's row key)."""
        return f"{self.group}\x1f{self.row}\x1f{type(self.key).__name__}:{self.key}"


@dataclass(frozen=True, slots=True)
class Latency:
    """Latency figures of one row and key, in ns (None while there are no samples)."""

    mean_ns: float | None = None
    p50_ns: float | None = None
    p95_ns: float | None = None
    p99_ns: float | None = None
    min_ns: float | None = None
    max_ns: float | None = None

    def to_json(self) -> dict[str, float | None]:
        return {f: getattr(self, f) for f in LATENCY_FIELDS}


NO_LATENCY = Latency()


@dataclass(frozen=True, slots=True)
class ProbeEntry:
    """One probe row and key: its statistics since it attached.

    The flat latency fields are net of the probe's own cost inside the interval; `raw`
    holds the measured ones (None for a count-only probe). `hist` holds the non-empty
    log-linear buckets (index, count) — `collectors.histogram.bucket_bounds` gives each
    one's range — or None when the snapshot was taken without histograms."""

    group: int | str
    id: int | None  # the engine's row (None for a spec that never attached)
    spec: str
    name: str
    kind: str | None  # uprobe | usdt
    key: ProbeKey = None
    state: str = "pending"  # pending | attached | detached | ended | error
    target: str | None = None  # the file probed
    cost_class: str | None = None  # "class" in JSON: uprobe-emulated, usdt-pair, ...
    count: int = 0
    rate_hz: float = 0.0
    overhead_ns_per_hit: float | None = None
    overhead_source: str | None = None  # calibrated | default
    bpf_ns_per_hit: float | None = None
    latency: Latency = NO_LATENCY
    raw: Latency | None = None
    hist: tuple[tuple[int, int], ...] | None = None
    error: str | None = None  # one line, with state "error"

    @property
    def ref(self) -> ProbeRef:
        return ProbeRef(self.group, self.id, self.key)

    # The net figures by name, as consumers read them.
    @property
    def mean_ns(self) -> float | None:
        return self.latency.mean_ns

    @property
    def p50_ns(self) -> float | None:
        return self.latency.p50_ns

    @property
    def p95_ns(self) -> float | None:
        return self.latency.p95_ns

    @property
    def p99_ns(self) -> float | None:
        return self.latency.p99_ns

    @property
    def min_ns(self) -> float | None:
        return self.latency.min_ns

    @property
    def max_ns(self) -> float | None:
        return self.latency.max_ns

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "spec": self.spec,
            "name": self.name,
            "kind": self.kind,
            "key": self.key,
            "state": self.state,
            "target": self.target,
            "class": self.cost_class,
            "count": self.count,
            "rate_hz": self.rate_hz,
            "overhead_ns_per_hit": self.overhead_ns_per_hit,
            "overhead_source": self.overhead_source,
            "bpf_ns_per_hit": self.bpf_ns_per_hit,
            **self.latency.to_json(),
        }
        if self.raw is not None:
            out["raw"] = self.raw.to_json()
        if self.hist is not None:
            out["hist"] = [[b, c] for b, c in self.hist]
        if self.error:
            out["error"] = self.error
        out["group"] = self.group
        return out

    @classmethod
    def from_json(cls, value: Any) -> ProbeEntry:
        fast = _probe_fast(value)  # a row as this version writes it: checked in one pass
        if fast is not None:
            return fast
        d = _In(value, "probe")
        key = d.value("key")
        if key is not None and (not isinstance(key, (str, int)) or isinstance(key, bool)):
            raise SnapshotError("probe: key is neither a string nor an integer")
        key = inert(key) if isinstance(key, str) else key
        spec = d.text("spec")
        group = d.value("group")
        if not isinstance(group, (int, str)) or isinstance(group, bool):
            group = spec  # schema 0: the spec text was the group's identity
        return cls(
            group=group,
            id=d.integer("id"),
            spec=spec,
            name=d.text("name"),
            kind=d.opt_text("kind"),
            key=key,
            state=d.text("state", "pending"),
            target=d.opt_text("target"),
            cost_class=d.opt_text("class"),
            count=d.integer("count") or 0,
            rate_hz=d.number("rate_hz") or 0.0,
            overhead_ns_per_hit=d.number("overhead_ns_per_hit"),
            overhead_source=d.opt_text("overhead_source"),
            bpf_ns_per_hit=d.number("bpf_ns_per_hit"),
            latency=_latency(d),
            raw=_optional(lambda v: _latency(_In(v, "probe.raw")), d.value("raw")),
            hist=_hist(d.value("hist")),
            error=d.opt_text("error"),
        )


_LATENCY_KEYS = ("mean_ns", "p50_ns", "p95_ns", "p99_ns", "min_ns", "max_ns")
_NUMBER_TYPES = (int, float)
_TEXT_OR_NONE = (str, type(None))


def _numbers(values: list[Any]) -> bool:
    """Each None or a finite int/float (not bool): v - v is 0 only for finite numbers."""
    for v in values:  # noqa: SIM110 - a loop, not all(): the hot path of every row read back
        if v is not None and (type(v) not in _NUMBER_TYPES or v - v != 0):
            return False
    return True


def _probe_fast(value: Any) -> ProbeEntry | None:
    """The common row (every field of the type it should have) built with few checks;
    None for anything else, which the field-by-field path then reads or refuses."""
    if type(value) is not dict:
        return None
    g = value.get
    group: Any = g("group")
    key, count, ident = g("key"), g("count"), g("id")
    spec, name, state = g("spec"), g("name"), g("state")
    kind, target, cls, source, error = (
        g("kind"),
        g("target"),
        g("class"),
        g("overhead_source"),
        g("error"),
    )
    lat = [g(k) for k in _LATENCY_KEYS]
    rate, cost, bpf = g("rate_hz"), g("overhead_ns_per_hit"), g("bpf_ns_per_hit")
    raw = g("raw")
    if not (
        type(group) in (int, str)
        and (key is None or type(key) in (int, str))
        and type(count) is int
        and (ident is None or type(ident) is int)
        and type(spec) is str
        and type(name) is str
        and type(state) is str
        and type(kind) in _TEXT_OR_NONE
        and type(target) in _TEXT_OR_NONE
        and type(cls) in _TEXT_OR_NONE
        and type(source) in _TEXT_OR_NONE
        and type(error) in _TEXT_OR_NONE
        and _numbers([rate, cost, bpf, *lat])
        and (raw is None or type(raw) is dict)
    ):
        return None
    texts = [spec, name, state, *(t for t in (key, kind, target, cls, source, error) if t)]
    if has_unsafe("".join(t for t in texts if type(t) is str)):
        return None  # the field-by-field path makes it inert
    raw_lat = None
    if raw is not None:
        raw_values = [raw.get(k) for k in _LATENCY_KEYS]
        if not _numbers(raw_values):
            return None
        raw_lat = Latency(*raw_values)
    try:
        hist = _hist(g("hist"))
    except SnapshotError:
        return None
    return ProbeEntry(
        group=group,
        id=ident,
        spec=spec,
        name=name,
        kind=kind,
        key=key,
        state=state,
        target=target,
        cost_class=cls,
        count=count,
        rate_hz=rate or 0.0,
        overhead_ns_per_hit=cost,
        overhead_source=source,
        bpf_ns_per_hit=bpf,
        latency=Latency(*lat),
        raw=raw_lat,
        hist=hist,
        error=error,
    )


def _latency(d: _In) -> Latency:
    n = d.number
    return Latency(n("mean_ns"), n("p50_ns"), n("p95_ns"), n("p99_ns"), n("min_ns"), n("max_ns"))


def _hist(value: Any) -> tuple[tuple[int, int], ...] | None:
    if value is None:
        return None
    # The common case first: JSON integers (a snapshot from the agent has only these).
    if isinstance(value, list) and all(
        type(b) is list and len(b) == 2 and type(b[0]) is int and type(b[1]) is int for b in value
    ):
        return tuple((b, c) for b, c in value)
    if not isinstance(value, list) or not all(
        isinstance(b, list) and len(b) == 2 and all(_whole(x) for x in b) for b in value
    ):
        raise SnapshotError("probe: hist is not a list of [bucket, count] pairs")
    return tuple((int(b), int(c)) for b, c in value)


# ----- devices ------------------------------------------------------------------------


@dataclass
class DeviceReading:
    """One device's reading. A collector fills it while it reads the device (hence not
    frozen); once in a snapshot it is never changed."""

    id: str
    kind: DeviceKind
    name: str
    util: float | None = None  # 0..1, None when unknown
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    energy_j: float | None = None  # since the collector started
    energy_source: str | None = None  # rapl | nvml | amdsmi | xrt | hwmon | estimate | None
    energy_method: str | None = None  # counter (hardware energy counter) | power (integrated)
    temp_c: float | None = None
    note: str = ""  # why a value is missing, or where an estimate comes from
    extra: dict[str, Any] = field(default_factory=dict)  # source-specific figures

    def set_energy(self, e: EnergyReading, measured_power_w: float | None = None) -> None:
        """Energy, its source and method; power as measured, else implied by the counter."""
        self.energy_j, self.energy_source, self.energy_method = e.energy_j, e.source, e.method
        self.power_w = measured_power_w if measured_power_w is not None else e.power_w

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "name": self.name,
            "util": self.util,
            "mem_used_bytes": self.mem_used_bytes,
            "mem_total_bytes": self.mem_total_bytes,
            "power_w": self.power_w,
            "energy_j": self.energy_j,
            "energy_source": self.energy_source,
            "energy_method": self.energy_method,
            "temp_c": self.temp_c,
            "note": self.note,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_json(cls, value: Any) -> DeviceReading:
        d = _In(value, "device")
        extra = d.value("extra")
        return cls(
            id=d.text("id"),
            kind=d.text("kind", "cpu"),  # type: ignore[arg-type]  # carried as recorded
            name=d.text("name"),
            util=d.number("util"),
            mem_used_bytes=d.integer("mem_used_bytes"),
            mem_total_bytes=d.integer("mem_total_bytes"),
            power_w=d.number("power_w"),
            energy_j=d.number("energy_j"),
            energy_source=d.opt_text("energy_source"),
            energy_method=d.opt_text("energy_method"),
            temp_c=d.number("temp_c"),
            note=d.text("note"),
            extra=_inert_values(extra) if isinstance(extra, dict) else {},
        )


@dataclass(frozen=True, slots=True)
class SourceState:
    """A device source of the node (rapl, nvml, ...) and why it is not there."""

    name: str
    state: str  # ok | missing | denied | degraded
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "reason": self.reason}

    @classmethod
    def from_json(cls, value: Any) -> SourceState:
        d = _In(value, "device source")
        return cls(d.text("name"), d.text("state"), d.text("reason"))


# ----- the session's parts -------------------------------------------------------------


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
        d = _In(value, "overhead")
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
        d = _In(value, "target")
        pids = d.value("pids") or []
        if not isinstance(pids, list) or not all(_whole(p) and p > 0 for p in pids):
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
        d = _In(value, "command")
        argv = d.value("argv")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise SnapshotError("command: argv is not a list of strings")
        return cls(
            tuple(inert(a) for a in argv),
            d.integer("pid"),
            d.integer("status"),
            d.opt_text("output"),
        )


# ----- the advisor's part --------------------------------------------------------------


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
        d = _In(value, "task")
        bucket = d.value("input_bucket") or [0, 0]
        pareto = d.value("pareto") or []
        if not (isinstance(bucket, list) and len(bucket) == 2 and all(map(_whole, bucket))):
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
        d = _In(value, "advice")
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
        d = _In(value, "move")
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
        d = _In(value, "advisor")
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


# ----- the snapshot ---------------------------------------------------------------------


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
        d = _In(value, "snapshot")
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
            device_sources=_optional(lambda v: tuple(map(SourceState.from_json, v)), sources),
            overhead=_optional(Overhead.from_json, d.value("overhead")),
            target=_optional(ProbeTarget.from_json, d.value("target")),
            advisor=_optional(AdvisorState.from_json, d.value("advisor")),
            command=_optional(CommandState.from_json, d.value("command")),
            warnings=tuple(inert(w) for w in warnings),
            target_ended=d.value("target_ended") is True,
            final=d.value("final") is True,
            schema_version=d.integer("schema_version") or 0,
        )


# ----- reading JSON back, checked ----------------------------------------------------------


def _optional(read: Callable[[Any], T], value: Any) -> T | None:
    return None if value is None else read(value)


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _whole(v: Any) -> bool:
    return _finite(v) and float(v).is_integer()


def _inert_values(value: Any) -> Any:
    """VALUE with every string in it inert (a device's extra: GPU process names...)."""
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, dict):
        return {k: _inert_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_inert_values(v) for v in value]
    return value


class _In:
    """One JSON object's fields, each checked for the type the contract gives it."""

    def __init__(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise SnapshotError(f"{where}: not a JSON object")
        self.d: dict[str, Any] = value
        self.where = where

    def value(self, k: str) -> Any:
        return self.d.get(k)

    def _bad(self, k: str, what: str) -> SnapshotError:
        return SnapshotError(f"{self.where}: {k} is not {what}")

    def number(self, k: str) -> float | None:
        v: Any = self.d.get(k)
        kind = type(v)
        # Exact types first (the hot path of a replay or an agent's snapshot): a float is
        # finite when v - v is 0 (inf - inf and nan - nan are nan); bool is not an int here.
        if kind is float:
            if v - v == 0.0:
                return float(v)
            raise self._bad(k, "a finite number")
        if kind is int or v is None:
            return v  # type: ignore[no-any-return]  # an int stays an int (byte-equal JSON)
        raise self._bad(k, "a finite number")

    def integer(self, k: str) -> int | None:
        v = self.d.get(k)
        if v is None:
            return None
        if not _whole(v):
            raise self._bad(k, "an integer")
        return int(v)

    def text(self, k: str, default: str = "") -> str:
        v = self.d.get(k)
        if v is None:
            return default
        if not isinstance(v, str):
            raise self._bad(k, "a string")
        return inert(v)  # from a recording, an agent or a remote: shown, never acted on

    def opt_text(self, k: str) -> str | None:
        return None if self.d.get(k) is None else self.text(k)

    def items(self, k: str) -> list[Any]:
        v = self.d.get(k)
        if v is None:
            return []
        if not isinstance(v, list):
            raise self._bad(k, "a list")
        return v

    def mapping(self, k: str) -> dict[str, Any]:
        v = self.d.get(k)
        if v is None:
            return {}
        if not isinstance(v, dict) or not all(isinstance(x, dict) for x in v.values()):
            raise self._bad(k, "an object of objects")
        return v
