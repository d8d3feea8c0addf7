"""The exporter reads a session's last snapshot, never its engine (histograms included,
whatever the client asked for), and publishes a probe row's joules at most once an
energy period, as it does the devices' counters."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client import CollectorRegistry, generate_latest

from adaptyst_top.agent.exporter.collector import AgentCollector, ProbeSource
from adaptyst_top.runtime.session import Session
from adaptyst_top.runtime.session_options import SessionOptions, Target
from adaptyst_top.snapshot import Latency, Overhead, ProbeEntry, Snapshot


class Untouchable:
    """An engine that fails the test if anything reads it."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the exporter read the engine's {name}")


class FakeHub:
    def __init__(self) -> None:
        self.asked: list[bool] = []

    def snapshot(self, with_hist: bool = True) -> Snapshot:
        self.asked.append(with_hist)
        entry = ProbeEntry(
            group=1, id=0, spec="uprobe:/bin/x:f", name="f", kind="uprobe", key=None,
            state="attached", count=3, latency=Latency(1e3, 1e3, 1e3, 1e3, 1e3, 1e3),
            hist=((40, 3),) if with_hist else None, energy_j=0.25,
            energy_method="estimate-oncpu",
        )  # fmt: skip
        return Snapshot(t=1.0, host="h", probes=(entry,), overhead=Overhead(0.004, 0.01, "x"))


def session(exported: bool) -> tuple[Session, FakeHub]:
    hub = FakeHub()
    s = Session(hub=hub, engine=Untouchable(), pid=None)  # type: ignore[arg-type]
    s.options = SessionOptions(Target(job="77"))
    s.exported = exported
    return s, hub


def test_no_source_before_the_first_snapshot() -> None:
    s, _ = session(exported=True)
    assert ProbeSource.of("alice", s) is None


def test_the_last_snapshot_is_exported_with_its_histograms_and_joules() -> None:
    s, hub = session(exported=True)
    shown = s.snapshot(with_hist=False)
    assert hub.asked == [True]  # read once, with the histograms the exporter needs
    assert shown.probes[0].hist is None  # the client did not ask for them
    src = ProbeSource.of("alice", s)
    assert src is not None
    assert (src.user, src.job, src.overhead_share) == ("alice", "77", 0.004)
    [row] = src.probes
    assert row.hist == ((40, 3),) and row.energy_j == 0.25 and row.count == 3


def test_without_an_exporter_nothing_is_kept() -> None:
    s, hub = session(exported=False)
    s.snapshot(with_hist=False)
    assert hub.asked == [False] and s.last is None


def test_a_rows_joules_are_published_once_a_period() -> None:
    """A row's joules are its share of the CPU's counter by on-CPU time: with its own
    on-CPU time and /proc/stat they give the counter, so they wait for the period too."""
    entry = FakeHub().snapshot().probes[0]
    now = [entry]

    def joules(collector: AgentCollector) -> list[bytes]:
        registry = CollectorRegistry()
        registry.register(collector)
        text = generate_latest(registry).splitlines()
        return [x.rsplit(b" ", 1)[1] for x in text if x.startswith(b"adaptyst_probe_energy")]

    def sources() -> list[ProbeSource]:
        return [ProbeSource("alice", "7", now, None)]

    held = AgentCollector(list, sources, "all", energy_period_s=3600.0)
    fresh = AgentCollector(list, sources, "all")
    assert joules(held) == joules(fresh) == [b"0.25"]
    now = [replace(entry, energy_j=0.75)]
    assert joules(held) == [b"0.25"] and joules(fresh) == [b"0.75"]
