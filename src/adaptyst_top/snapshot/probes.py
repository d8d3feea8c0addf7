"""Probe rows: a row's identity, its latency figures and its statistics since it attached."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adaptyst_top.snapshot.inert import has_unsafe, inert
from adaptyst_top.snapshot.reading import Fields, SnapshotError, optional, whole

ProbeKey = str | int | None  # an @argN value: a string, an integer, or None when unsplit
LATENCY_FIELDS = ("mean_ns", "p50_ns", "p95_ns", "p99_ns", "min_ns", "max_ns")


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
        d = Fields(value, "probe")
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
            raw=optional(lambda v: _latency(Fields(v, "probe.raw")), d.value("raw")),
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


def _latency(d: Fields) -> Latency:
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
        isinstance(b, list) and len(b) == 2 and all(whole(x) for x in b) for b in value
    ):
        raise SnapshotError("probe: hist is not a list of [bucket, count] pairs")
    return tuple((int(b), int(c)) for b, c in value)
