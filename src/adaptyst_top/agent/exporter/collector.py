"""The agent's figures as Prometheus metrics (prometheus-client): the node's devices, the
users' probes, the agent itself. Served on `/metrics` (`agent --metrics HOST:PORT`)
or written for node_exporter's textfile collector (`agent --textfile DIR`): see
metrics_export.py.

Names follow Prometheus' rules and sit beside DCGM's and node_exporter's: base units
(`_seconds`, `_bytes`, `_watts`, `_joules`), `_total` on counters, a `node` label (the
short host name) on every series so that dashboards join them by node. A value that is
not known is absent, never 0.

Probe latency is a Prometheus histogram whose `le` boundaries are the in-kernel
histogram's own bucket edges at eight per power of two (LATENCY_BOUNDS_NS): every count
lands exactly, and `histogram_quantile` interpolates within a bucket at most 1/8 of an
octave wide (the monitor's percentiles come from the finer kernel buckets). Only the
boundaries a probe's calls occupy are exported (`occupied`): the fixed set bounds the
series, the occupied range keeps a scrape small.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from adaptyst_top.collectors.energy.jobs import JobEnergy
from adaptyst_top.collectors.energy.task_runs import run_joules
from adaptyst_top.placement.loop import TASK_PROBE_NAME
from adaptyst_top.placement.task_keys import parse_key
from adaptyst_top.runtime import metric_names as mn
from adaptyst_top.runtime.remote.settings import AgentSettings
from adaptyst_top.snapshot import DeviceReading, ProbeEntry
from adaptyst_top.snapshot.histogram import bucket_bounds
from adaptyst_top.system.slurm_jobs import job_of

JobTotals = dict[tuple[str, str, str], float]  # (job, device, method) -> joules

if TYPE_CHECKING:
    from adaptyst_top.runtime.session import Session

ProbeExport = Literal["none", "jobs", "all"]
DEFAULT_PROBE_EXPORT: ProbeExport = cast(ProbeExport, AgentSettings.probe_metrics)
# Probe label sets per node (each ~15-110 series: docs/metrics.md).
DEFAULT_MAX_PROBE_SERIES: int = AgentSettings.max_probe_series
# 2^9 ns (0.5 us) to 2^34 ns (17 s), eight edges per power of two (the kernel's 16
# sub-buckets per power of two, every other one).
LATENCY_BOUNDS_NS: tuple[int, ...] = (
    *((1 << e) + k * (1 << e) // 8 for e in range(9, 34) for k in range(8)),
    1 << 34,
)


ProbeRow = tuple[float, list[str], ProbeEntry]  # (rate, label values, the entry)
TaskKey = tuple[str, str, str, str]  # (user, job, task, device)
TaskTotals = dict[TaskKey, tuple[int, float]]  # runs, total ns
MAX_DROPPED_REMEMBERED = 100_000  # distinct label sets counted as dropped (~7 MB at most)


@dataclass(frozen=True)
class ProbeSource:
    """One client's probes, as the agent has them: whose, for which job."""

    user: str
    job: str | None
    probes: Sequence[ProbeEntry]
    overhead_share: float | None

    @classmethod
    def of(cls, user: str, session: Session) -> ProbeSource | None:
        """USER's SESSION's probes as its last snapshot has them, joules included (None
        before it has an engine or a snapshot): never read again from the engine."""
        snap = session.last
        if session.engine is None or snap is None:
            return None
        pid = session.pid
        job = session.options.target.job or (job_of(pid) if pid is not None else None)
        share = None if snap.overhead is None else snap.overhead.share
        return cls(user, job, snap.probes, share)


def node_name() -> str:
    return socket.gethostname().split(".")[0]


def cumulative_buckets(hist: Sequence[tuple[int, int]], offset_ns: float) -> list[int]:
    """Counts at or below each of LATENCY_BOUNDS_NS, from the kernel's buckets (index,
    count), each taken at its upper edge less OFFSET_NS (the probe's own cost)."""
    out = [0] * len(LATENCY_BOUNDS_NS)
    edges = LATENCY_BOUNDS_NS
    for index, count in hist:
        top = bucket_bounds(index)[1] - offset_ns
        # the first boundary at or above the bucket's top: bisect by hand (small list)
        lo, hi = 0, len(edges)
        while lo < hi:
            mid = (lo + hi) // 2
            if edges[mid] < top:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(edges):
            out[lo] += count
    for i in range(1, len(out)):
        out[i] += out[i - 1]
    return out


def occupied(counts: Sequence[int]) -> tuple[int, int]:
    """The range of boundaries worth exporting: from the empty one just below the first
    call (histogram_quantile takes a first bucket to start at 0: this one starts it where
    it should) to the first that holds every call; +Inf says the rest. A narrow
    distribution is ~10 series instead of 201."""
    if not counts or counts[-1] == 0:
        return 0, 0
    first = next(i for i, c in enumerate(counts) if c)
    last = next(i for i, c in enumerate(counts) if c == counts[-1])
    return max(0, first - 1), last + 1


class AgentCollector(Collector):
    """Everything the agent exports, read at each scrape."""

    def __init__(
        self,
        devices: Callable[[], Sequence[DeviceReading]],
        probes: Callable[[], Sequence[ProbeSource]],
        export: ProbeExport = DEFAULT_PROBE_EXPORT,
        max_series: int = DEFAULT_MAX_PROBE_SERIES,
        node: str | None = None,
        energy_period_s: float = 0.0,
    ) -> None:
        """energy_period_s: device power and energy and jobs' joules are published at
        most this often (0: at every scrape). /metrics needs no login: a counter any
        local user reads every second is the PLATYPUS side channel."""
        self.devices = devices
        self.energy_period_s = energy_period_s
        self._held: tuple[float, dict[str, tuple[float | None, float | None]], JobTotals] | None
        self._held = None
        # A probe row's joules as published at the last period's start (by its label
        # values): a row's share of the CPU's counter, with its own on-CPU time and
        # /proc/stat, gives the counter, so it is held to the same period.
        self._probe_j: dict[tuple[str, ...], tuple[float, str]] = {}
        self._fresh = False
        self.probes = probes
        self.export = export
        self.max_series = max_series
        self.node = node or node_name()
        self._dropped: set[int] = set()  # label sets ever left out (hashes), each once
        self.job_energy = JobEnergy()
        # (user, job, task) -> (device it ran on most at the last scrape, moves, runs seen)
        self._placement: dict[tuple[str, str, str], tuple[str, int, dict[str, int]]] = {}
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        with self._lock:  # two scrapes at once would count the drops twice
            start = time.perf_counter()
            devices = list(self.devices())
            self.job_energy.update(devices)
            devices, jobs = self._published_energy(devices)
            yield from self._devices(devices)
            yield self._job_energy(jobs)
            # What the admin exports (probe_metrics): every user's, only jobs', or none.
            sources = [
                s
                for s in self.probes()
                if self.export == "all" or (self.export == "jobs" and s.job)
            ]
            rows, tasks = self._within_cap(sources)
            yield from self._tasks(tasks, devices)
            yield from self._probes(sources, rows)
            took = GaugeMetricFamily(
                mn.SCRAPE_DURATION,
                "How long the agent took to gather these metrics",
                labels=["node"],
            )
            took.add_metric([self.node], time.perf_counter() - start)
            yield took
            clock = GaugeMetricFamily(
                mn.TIME,
                "The node's clock at this scrape (when a node that stopped reporting was "
                "last heard of, after its series went stale)",
                labels=["node"],
            )
            clock.add_metric([self.node], time.time())
            yield clock

    # ----- devices ---------------------------------------------------------------------

    def _published_energy(
        self, devices: list[DeviceReading]
    ) -> tuple[list[DeviceReading], JobTotals]:
        """DEVICES with the power and energy published last, and the jobs' joules then,
        both taken anew once energy_period_s has passed."""
        now = time.monotonic()
        if self._held is None or now - self._held[0] >= self.energy_period_s:
            figures = {d.id: (d.power_w, d.energy_j) for d in devices}
            self._held = (now, figures, dict(self.job_energy.totals))
            self._fresh = True
        _, figures, jobs = self._held
        held = []
        for d in devices:
            power, energy = figures.get(d.id, (None, None))
            same = (power, energy) == (d.power_w, d.energy_j)
            held.append(d if same else dataclasses.replace(d, power_w=power, energy_j=energy))
        return held, jobs

    def _job_energy(self, totals: JobTotals) -> Metric:
        fam = CounterMetricFamily(
            mn.JOB_ENERGY,
            "Device energy attributed to each Slurm job on the node by its share of the "
            "device (method); the rest is job=unattributed",
            labels=["node", "job", "device", "method"],
        )
        for (job, device, method), joules in sorted(totals.items()):
            fam.add_metric([self.node, job, device, method], joules)
        return fam

    def _devices(self, devices: Sequence[DeviceReading]) -> Iterator[Metric]:
        labels = ["node", "device", "kind", "name"]
        fams: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
            "util": GaugeMetricFamily(
                mn.DEVICE_UTILIZATION, "Device busy share, 0 to 1", labels=labels
            ),
            "mem_used": GaugeMetricFamily(
                mn.DEVICE_MEMORY_USED, "Device memory in use", labels=labels
            ),
            "mem_total": GaugeMetricFamily(
                mn.DEVICE_MEMORY_TOTAL, "Device memory size", labels=labels
            ),
            "power": GaugeMetricFamily(
                mn.DEVICE_POWER,
                "Device power draw, by where it comes from",
                labels=[*labels, "source"],
            ),
            "energy": CounterMetricFamily(
                mn.DEVICE_ENERGY,
                "Device energy since the agent started, by where it comes from",
                labels=[*labels, "source"],
            ),
            "temp": GaugeMetricFamily(mn.DEVICE_TEMPERATURE, "Device temperature", labels=labels),
        }
        for d in devices:
            base = [self.node, d.id, d.kind, d.name]
            source: list[str] = [d.energy_source or "unknown"]
            for key, value, extra in (
                ("util", d.util, []),
                ("mem_used", d.mem_used_bytes, []),
                ("mem_total", d.mem_total_bytes, []),
                ("power", d.power_w, source),
                ("energy", d.energy_j, source),
                ("temp", d.temp_c, []),
            ):
                if value is not None:  # unknown is absent, never 0
                    fams[key].add_metric(base + extra, float(value))
        yield from fams.values()

    # ----- probes ----------------------------------------------------------------------

    def _within_cap(self, sources: Sequence[ProbeSource]) -> tuple[list[ProbeRow], TaskTotals]:
        """Probe rows and task label sets, the most active of both together up to the
        cap (one bound over every per-user series); what is left out is counted once
        per label set."""
        rows: list[ProbeRow] = []
        totals: dict[TaskKey, tuple[int, float, float]] = {}
        for src in sources:
            job = src.job or ""
            for p in src.probes:
                if p.state in ("pending", "error"):
                    continue
                key = "" if p.key is None else str(p.key)
                rows.append((p.rate_hz, [self.node, p.name, key, src.user, job], p))
                parsed = (
                    parse_key(p.key)
                    if p.name == TASK_PROBE_NAME and isinstance(p.key, str)
                    else None
                )
                if parsed is None or p.latency.mean_ns is None:
                    continue
                k = (src.user, job, parsed[0], parsed[1])
                n, ns, hz = totals.get(k, (0, 0.0, 0.0))
                totals[k] = (n + p.count, ns + p.latency.mean_ns * p.count, hz + p.rate_hz)
        ranked = [(r[0], 0, tuple(r[1]), r) for r in rows] + [
            (v[2], 1, k, (k, v)) for k, v in totals.items()
        ]
        if len(ranked) > self.max_series:
            ranked.sort(key=lambda r: -r[0])  # the most active stay
            for _, kind, labels, _ in ranked[self.max_series :]:
                if len(self._dropped) < MAX_DROPPED_REMEMBERED:
                    self._dropped.add(hash((kind, labels)))
            ranked = ranked[: self.max_series]
        kept_rows = [cast(ProbeRow, r[3]) for r in ranked if r[1] == 0]
        kept_tasks = dict(
            cast(tuple[TaskKey, tuple[int, float, float]], r[3]) for r in ranked if r[1] == 1
        )
        return kept_rows, {k: (n, ns) for k, (n, ns, _) in kept_tasks.items()}

    def _tasks(self, totals: TaskTotals, devices: Sequence[DeviceReading]) -> Iterator[Metric]:
        """The placement API's tasks (their USDT pair's rows, keyed task|device|size|
        features): runs per task and device, time and energy per run, where each runs."""
        labels = ["node", "user", "job", "task", "device"]
        runs = CounterMetricFamily(mn.TASK_RUNS, "Runs of a task on a device", labels=labels)
        seconds = GaugeMetricFamily(
            mn.TASK_RUN_SECONDS, "Mean time of a task's run on a device", labels=labels
        )
        joules = GaugeMetricFamily(
            mn.TASK_RUN_JOULES,
            "Energy of a task's run on a device: its mean time at the device's power",
            labels=labels,
        )
        info = InfoMetricFamily(
            mn.TASK_PLACEMENT,
            "The device a task ran on most since the last scrape",
            labels=["node", "user", "job", "task"],
        )
        moves = CounterMetricFamily(
            mn.TASK_MOVES,
            "Times a task's device changed between scrapes",
            labels=["node", "user", "job", "task"],
        )
        for (user, job, task, device), (n, ns) in sorted(totals.items()):
            values = [self.node, user, job, task, device]
            runs.add_metric(values, float(n))
            if n:
                seconds.add_metric(values, ns / n / 1e9)
                if (run_j := run_joules(device, devices, ns / n / 1e9)) is not None:
                    joules.add_metric(values, run_j)
        for (user, job, task), done in self._placements(totals).items():
            info.add_metric([self.node, user, job, task], {"current": done[0]})
            moves.add_metric([self.node, user, job, task], float(done[1]))
        yield from (runs, seconds, joules, info, moves)

    def _placements(
        self, totals: dict[tuple[str, str, str, str], tuple[int, float]]
    ) -> dict[tuple[str, str, str], tuple[str, int, dict[str, int]]]:
        """Each task's device now (most runs since the last scrape) and its moves."""
        by_task: dict[tuple[str, str, str], dict[str, int]] = {}
        for (user, job, task, device), (n, _) in totals.items():
            by_task.setdefault((user, job, task), {})[device] = n
        for key, counts in by_task.items():
            current, moved, before = self._placement.get(key, ("", 0, {}))
            recent = {d: n - before.get(d, 0) for d, n in counts.items()}
            busiest = max(recent, key=lambda d: recent[d])
            if recent[busiest] > 0 and busiest != current:
                moved += 1 if current else 0
                current = busiest
            self._placement[key] = (current or busiest, moved, counts)
        # Only the tasks shown now are remembered: a flood of names leaves nothing behind.
        self._placement = {k: v for k, v in self._placement.items() if k in by_task}
        return self._placement

    def _probes(self, sources: Sequence[ProbeSource], rows: list[ProbeRow]) -> Iterator[Metric]:
        labels = ["node", "probe", "key", "user", "job"]
        calls = CounterMetricFamily(
            mn.PROBE_CALLS, "Calls (hits) of a probed function or USDT probe", labels=labels
        )
        latency = HistogramMetricFamily(
            mn.PROBE_LATENCY,
            "Probed call latency, net of the probe's own cost",
            labels=labels,
        )
        overhead = GaugeMetricFamily(
            mn.PROBE_OVERHEAD,
            "The probes' estimated cost as a share of the target's CPU time",
            labels=["node", "user", "job"],
        )
        energy = CounterMetricFamily(
            mn.PROBE_ENERGY,
            "Energy of a probe row's calls on the device they ran on, by on-CPU time "
            "(method: rapl-oncpu, estimate-oncpu, ...)",
            labels=[*labels, "method"],
        )
        dropped = CounterMetricFamily(
            mn.PROBE_SERIES_DROPPED,
            "Probe and task label sets left out over the cap (the least active first), "
            "each counted once",
            labels=["node"],
        )
        for src in sources:
            if src.overhead_share is not None:
                overhead.add_metric([self.node, src.user, src.job or ""], src.overhead_share)
        if self._fresh:
            self._fresh = False
            self._probe_j = {
                tuple(values): (p.energy_j, p.energy_method)
                for _, values, p in rows
                if p.energy_j is not None and p.energy_method is not None
            }
        for _rate, values, p in rows:
            calls.add_metric(values, float(p.count))
            if (held := self._probe_j.get(tuple(values))) is not None:
                energy.add_metric([*values, held[1]], held[0])
            if p.hist is not None and p.latency.mean_ns is not None:
                off = 0.0
                if p.raw is not None and p.raw.mean_ns is not None:
                    off = max(0.0, p.raw.mean_ns - p.latency.mean_ns)
                counts = cumulative_buckets(p.hist, off)
                lo, hi = occupied(counts)
                buckets = [
                    (f"{LATENCY_BOUNDS_NS[i] / 1e9:.9g}", float(counts[i])) for i in range(lo, hi)
                ]
                # The count and the buckets come from two maps read one after the
                # other: calls between the two reads are in one only. +Inf is never
                # below a finite bucket.
                total = max(float(p.count), float(counts[hi - 1]) if hi > lo else 0.0)
                buckets.append(("+Inf", total))
                latency.add_metric(values, buckets, p.latency.mean_ns * total / 1e9)
        dropped.add_metric([self.node], float(len(self._dropped)))
        yield from (calls, latency, energy, overhead, dropped)


__all__ = ["LATENCY_BOUNDS_NS", "AgentCollector", "ProbeSource", "cumulative_buckets", "occupied"]
