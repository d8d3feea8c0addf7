"""`enter`: one probe in detail: its latency histogram with percentile markers, and
its rate and p99 over time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from adaptyst_top.snapshot import EnergySplit, Latency, ProbeEntry, ProfilePart
from adaptyst_top.snapshot.histogram import bucket_bounds
from adaptyst_top.tui.format import fmt_energy, fmt_latency, fmt_ns, fmt_rate
from adaptyst_top.tui.glyphs import bar, sparkline

MAX_ROWS = 24


def energy_line(p: ProbeEntry, splits: Sequence[EnergySplit]) -> str:
    """The row's joules, per call and in all, its calls' time on a CPU, and what of the
    device's energy no row was charged."""
    if p.cpu_ns is None:
        return "energy: not measured (a count-only probe, a kernel without BTF, or a recording of before)"
    on_cpu = f"on a CPU {fmt_ns(p.cpu_ns / p.count) if p.count else '-'}/call"
    if p.energy_j is None or p.energy_method is None:
        return f"{on_cpu}; energy: none yet (no CPU energy: RAPL or --cpu-power-model)"
    per_call = f"{fmt_energy(p.energy_j / p.count)}/call, " if p.count else ""
    line = f"energy {per_call}{fmt_energy(p.energy_j)} in all ({p.energy_method}); {on_cpu}"
    split = next((s for s in splits if s.method == p.energy_method), None)
    if split is not None:
        line += (
            f"; of the {split.device}'s {fmt_energy(split.measured_j)}, "
            f"{fmt_energy(split.unattributed_j)} went to no probe"
        )
    return line


def never_called_line(p: ProbeEntry, profile: ProfilePart | None) -> str:
    """Why a function hot in the profile counts no call: a loop entered before its probe
    attached (an interpreter's evaluation loop, a main loop) is timed only when entered
    again (issue 74's newcomer probed CPython's and saw nothing, unexplained)."""
    if p.kind != "uprobe" or p.count or profile is None or not profile.samples:
        return ""
    base = (p.target or "").rsplit("/", 1)[-1]
    hot = next(
        (
            f
            for f in profile.functions
            if p.name in (f.symbol, f.name) and f.module.rsplit("/", 1)[-1] == base
        ),
        None,
    )
    if hot is None or not hot.total:
        return ""
    return (
        f"In {hot.total / profile.samples:.0%} of the profile's samples, yet not called since "
        "this probe attached: it was already running (a loop entered before: an "
        "interpreter's evaluation loop, a main loop) and is timed only when entered again. "
        "Probe what it calls, or its Python functions (python:FILE:FUNC).\n"
    )


def histogram_rows(
    hist: Sequence[Sequence[int]], max_rows: int = MAX_ROWS
) -> list[tuple[float, float, int]]:
    """(low_ns, high_ns, count) rows: every bucket when few, else merged per power of two
    (per two, four... powers of two while still more than MAX_ROWS)."""
    buckets = [(bucket_bounds(int(b)), int(c)) for b, c in hist if c]
    if len(buckets) <= max_rows:
        return [(float(lo), float(hi), c) for (lo, hi), c in buckets]
    span = 1
    while True:
        merged: dict[int, list[float]] = {}
        for (lo, hi), c in buckets:
            p = max(0, int(lo).bit_length() - 1) // span
            row = merged.setdefault(p, [float(lo), float(hi), 0])
            row[0], row[1], row[2] = min(row[0], lo), max(row[1], hi), row[2] + c
        if len(merged) <= max_rows or span >= 64:
            return [(lo, hi, int(c)) for _, (lo, hi, c) in sorted(merged.items())]
        span *= 2


def render_histogram(p: ProbeEntry, width: int, ascii: bool, max_rows: int = MAX_ROWS) -> str:
    rows = histogram_rows(p.hist or [], max_rows)
    if not rows:
        return "no latency samples yet" if p.raw is not None else "a count-only probe: no latency"
    raw = p.raw or Latency()
    marks = {"p50": raw.p50_ns, "p95": raw.p95_ns, "p99": raw.p99_ns}
    peak = max(c for _, _, c in rows)
    bar_w = max(10, width - 48)
    lines = []
    for lo, hi, c in rows:
        tags = [f"raw {q}" for q, v in marks.items() if v is not None and lo <= v < hi]
        label = f"{fmt_ns(lo):>9} – {fmt_ns(hi):<9}"
        lines.append(
            f"{label} {bar(c / peak, bar_w, ascii)} {c:>9,}  {' '.join('◀ ' + t if not ascii else '< ' + t for t in tags)}"
        )
    return "\n".join(lines)


class DetailScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,enter,q", "app.pop_screen", "Back"),
    ]

    def __init__(self, key: str, ascii: bool = False) -> None:
        super().__init__()
        self.key = key
        self.ascii = ascii

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("", id="detail-title", markup=False)  # names, keys: any bytes
            # The history before the histogram: on a short terminal it is never the part
            # pushed below the fold (it was, at 100x30).
            yield Static("", id="detail-history", markup=False)
            yield Static("", id="detail-hist", markup=False)
        yield Footer()

    def show(
        self,
        p: ProbeEntry | None,
        rates: Sequence[float | None],
        p99s: Sequence[float | None],
        splits: Sequence[EnergySplit] = (),
        profile: ProfilePart | None = None,
    ) -> None:
        if p is None:
            self.query_one("#detail-title", Static).update("this probe is gone")
            return
        key = f" [{p.key}]" if p.key is not None else ""
        # The histogram and its markers are raw: a net p50 of "<1 µs" beside a marker on
        # 2-4 µs read as a contradiction (issue 74's newcomer); both are said.
        raw_p50 = p.raw.p50_ns if p.raw is not None else None
        net = f"net of {fmt_ns(p.net_of_ns)}" if p.net_of_ns is not None else "net"
        if p.corrected_ns is not None:
            # The class's figure was more than the fastest call took: capped, and said.
            net += f", {fmt_ns(p.corrected_ns)} under the class: capped at raw min"
        title = (
            f"{p.name}{key}   {p.state}   {p.spec}\n"
            f"calls {p.count:,}   {fmt_rate(p.rate_hz)}/s   "
            f"mean {fmt_latency(p.mean_ns)}   p50 {fmt_latency(p.p50_ns)}   "
            f"p95 {fmt_latency(p.p95_ns)}   p99 {fmt_latency(p.p99_ns)}   "
            f"max {fmt_latency(p.max_ns)}   ({net}; raw p50 {fmt_latency(raw_p50)})\n"
            f"probe cost {fmt_ns(p.overhead_ns_per_hit)}/hit ({p.overhead_source or '?'}; class "
            f"{p.cost_class or '?'}), BPF {fmt_ns(p.bpf_ns_per_hit)}/hit. "
            "The histogram is of raw intervals; the figures above are net of the probe cost.\n"
            f"{energy_line(p, splits)}\n{never_called_line(p, profile)}"
        )
        self.query_one("#detail-title", Static).update(title)
        width = self.size.width or 80
        # Title (6 lines), history (3), footer: the histogram has the rest.
        rows = max(6, min(MAX_ROWS, (self.size.height or 30) - 11))
        self.query_one("#detail-hist", Static).update(render_histogram(p, width, self.ascii, rows))
        spark_w = max(10, min(100, width - 20))
        known_p99 = [v for v in p99s if v is not None]
        history = (
            f"calls/s {sparkline(rates, spark_w, self.ascii)}  {fmt_rate(rates[-1] if rates else None)}\n"
            f"p99     {sparkline(p99s, spark_w, self.ascii)}  {fmt_ns(known_p99[-1] if known_p99 else None)}\n"
        )
        self.query_one("#detail-history", Static).update(history)
