"""Probe rows: a row's identity, its latency figures and its statistics since it attached."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal

from adaptyst_top.snapshot.codec import JsonPart, json_field

ProbeKey = str | int | None  # an @argN value: a string, an integer, or None when unsplit
ProbeKind = Literal["uprobe", "usdt", "opencl", "cuda", "python", "mpi"]
ProbeState = Literal["pending", "attached", "detached", "ended", "error"]


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
class Latency(JsonPart):
    """Latency figures of one row and key, in ns (None while there are no samples)."""

    mean_ns: float | None = None
    p50_ns: float | None = None
    p95_ns: float | None = None
    p99_ns: float | None = None
    min_ns: float | None = None
    max_ns: float | None = None


NO_LATENCY = Latency()
LATENCY_FIELDS = tuple(f.name for f in fields(Latency))


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessPart(JsonPart):
    """One process's share of a row whose hits are counted per process (a job's, whose
    processes are its ranks): its hits, its time in the calls (net, as the row's
    latencies; None for a count-only row) and its latencies. `rank` is the MPI rank its
    own environment names (SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK),
    read by the user's side, never by root's agent; None where none is named. `node`
    is the node it runs on where a job's nodes are merged in one view."""

    pid: int
    rank: int | None = field(default=None, metadata=json_field(omit="none"))
    node: str | None = field(default=None, metadata=json_field(omit="none"))
    count: int = 0
    rate_hz: float = 0.0
    total_ns: float | None = field(default=None, metadata=json_field(omit="none"))
    latency: Latency = field(default=NO_LATENCY, metadata=json_field(flatten=True))

    @property
    def weight(self) -> float:
        """What the row's imbalance compares: the time in the calls, else the hits."""
        return float(self.count if self.total_ns is None else self.total_ns)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeEntry(JsonPart):
    """One probe row and key: its statistics since it attached.

    The flat latency fields are net of the probe's own cost inside the interval; `raw`
    holds the measured ones (None for a count-only probe). `hist` holds the non-empty
    log-linear buckets (index, count) — `snapshot.histogram.bucket_bounds` gives each
    one's range — or None when the snapshot was taken without histograms. `group` is
    written last, as the first version to write it did."""

    id: int | None  # the engine's row (None for a spec that never attached)
    spec: str
    name: str
    kind: ProbeKind | None
    key: ProbeKey = None
    state: ProbeState = "pending"
    target: str | None = None  # the file probed
    cost_class: str | None = field(default=None, metadata=json_field(name="class"))
    count: int = 0
    # Of `count`, the hits whose latency was measured, where a budget samples them (an
    # opencl or cuda row's launches timed on the device); None: every hit is.
    timed: int | None = field(default=None, metadata=json_field(omit="none"))
    rate_hz: float = 0.0
    overhead_ns_per_hit: float | None = None
    overhead_source: str | None = None  # calibrated | default
    bpf_ns_per_hit: float | None = None
    # On-CPU ns of the calls counted (measured in the kernel, net of the probe's own time
    # inside them, as the latencies are), and the joules they cost
    # on the device they ran on: `energy_method` says how (DESIGN: rapl-oncpu, ...).
    cpu_ns: int | None = field(default=None, metadata=json_field(omit="none"))
    energy_j: float | None = field(default=None, metadata=json_field(omit="none"))
    energy_method: str | None = field(default=None, metadata=json_field(omit="none"))
    latency: Latency = field(default=NO_LATENCY, metadata=json_field(flatten=True))
    raw: Latency | None = field(default=None, metadata=json_field(omit="none"))
    # The ns taken off each raw figure to make the net ones: the class's cost inside a
    # call, or the raw minimum where that was less; `corrected_ns`, present only then, is
    # how much less (the calibration overstates this site's cost by at least that much).
    net_of_ns: float | None = field(default=None, metadata=json_field(omit="none"))
    corrected_ns: float | None = field(default=None, metadata=json_field(omit="none"))
    hist: tuple[tuple[int, int], ...] | None = field(default=None, metadata=json_field(omit="none"))
    error: str | None = field(default=None, metadata=json_field(omit="empty"))  # with "error"
    # Counted per process (a job's session): each process's share, the busiest first, and
    # the imbalance over them: the most time (else hits) in the row over their mean, with
    # the pid of the process that has it. None where fewer than two processes hit it.
    parts: tuple[ProcessPart, ...] = field(default=(), metadata=json_field(omit="empty"))
    imbalance: float | None = field(default=None, metadata=json_field(omit="none"))
    imbalance_pid: int | None = field(default=None, metadata=json_field(omit="none"))
    # Schema 0 had no group: the spec text was the group's identity.
    group: int | str = field(metadata=json_field(missing_from="spec"))

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


@dataclass(frozen=True, slots=True)
class EnergySplit(JsonPart):
    """A device's energy since the probes' calls were first measured on it, and how much
    of it the probe rows were charged: the rest is unattributed (other processes, the
    system, idle), shown apart and never charged to a row."""

    device: str
    method: str  # as the rows' energy_method
    measured_j: float
    attributed_j: float

    @property
    def unattributed_j(self) -> float:
        return max(0.0, self.measured_j - self.attributed_j)
