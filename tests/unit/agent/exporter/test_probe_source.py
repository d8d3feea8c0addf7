"""The exporter reads a session's last snapshot, never its engine: the figures a scrape
exports are the ones the user saw, histograms and joules included, whatever the client
asked for."""

from __future__ import annotations

from adaptyst_top.agent.exporter.collector import ProbeSource
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
        )  # fmt: skip
        return Snapshot(t=1.0, host="h", probes=(entry,), overhead=Overhead(0.004, 0.01, "x"))


def session(keep_hist: bool) -> tuple[Session, FakeHub]:
    hub = FakeHub()
    s = Session(hub=hub, engine=Untouchable(), pid=None)  # type: ignore[arg-type]
    s.options = SessionOptions(Target(job="77"))
    s.keep_hist = keep_hist
    return s, hub


def test_no_source_before_the_first_snapshot() -> None:
    s, _ = session(keep_hist=True)
    assert ProbeSource.of("alice", s) is None


def test_the_last_snapshot_is_exported_with_its_histograms_and_joules() -> None:
    s, hub = session(keep_hist=True)
    shown = s.snapshot(with_hist=False)
    assert hub.asked == [True]  # read once, with the histograms the exporter needs
    assert shown.probes[0].hist is None  # the client did not ask for them
    src = ProbeSource.of("alice", s)
    assert src is not None
    assert (src.user, src.job, src.overhead_share) == ("alice", "77", 0.004)
    [row] = src.probes
    assert row.hist == ((40, 3),) and row.energy_j == 0.25 and row.count == 3


def test_without_an_exporter_the_histograms_are_not_built() -> None:
    s, hub = session(keep_hist=False)
    s.snapshot(with_hist=False)
    assert hub.asked == [False]
