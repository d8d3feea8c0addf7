"""A session carried across agent restarts (runtime/remote/continuity.py): the figures
after the break are those of one session that saw both halves' hits."""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import replace
from types import SimpleNamespace

import pytest

from adaptyst_top.runtime.remote import continuity as agent_continuity
from adaptyst_top.runtime.remote.continuity import Continuity
from adaptyst_top.snapshot import DeviceReading, Latency, ProbeEntry, Snapshot
from adaptyst_top.snapshot.histogram import bucket_of, percentiles

COST = 40.0  # ns of the probe's own, taken off the raw figures (the net ones)


def half(t: float, samples: list[int], joules: float, group: int) -> Snapshot:
    """An agent's snapshot of SAMPLES (ns), as a session of its own saw them."""
    hist = Counter(bucket_of(v) for v in samples)
    pct = percentiles(hist, (0.5, 0.95, 0.99))
    raw = Latency(sum(samples) / len(samples), *pct, float(min(samples)), float(max(samples)))
    net = Latency(*(None if v is None else max(0.0, v - COST) for v in raw.to_json().values()))
    probe = ProbeEntry(
        group=group, id=0, spec="uprobe:/bin/x:f", name="f", kind="uprobe",
        state="attached", target="/bin/x", count=len(samples), rate_hz=10.0,
        latency=net, raw=raw, hist=tuple(sorted(hist.items())),
    )  # fmt: skip
    device = DeviceReading(kind="cpu", id="cpu0", name="CPU", energy_j=joules)
    return Snapshot(t=t, host="n", probes=(probe,), devices=(device,))


def test_the_second_session_goes_on_from_the_first() -> None:
    first = [100, 200, 300, 400, 5000]
    second = [150, 250, 90_000]
    carry = Continuity()
    before = carry.carry(half(3.0, first, 12.5, group=0))
    time.sleep(0.2)
    gap = carry.broke()
    assert 0.2 <= gap < 1.0
    after = carry.carry(half(1.0, second, 2.0, group=7))
    whole = half(0.0, first + second, 0.0, group=7).probes[0]
    p = after.probes[0]
    assert p.count == 8 and p.hist == whole.hist and p.group == 7  # the new refs
    assert p.raw is not None and whole.raw is not None
    # the mean by count, the extremes of both, the merged histogram's percentiles
    assert [*p.raw.to_json().values()] == pytest.approx([*whole.raw.to_json().values()], abs=0.1)
    assert p.latency.mean_ns == pytest.approx(whole.latency.mean_ns)
    assert p.latency.p99_ns == pytest.approx(whole.latency.p99_ns, abs=0.1)
    assert after.devices[0].energy_j == pytest.approx(14.5)
    assert before.t + gap + 1.0 == pytest.approx(after.t, abs=0.01)  # one clock


def test_a_held_snapshot_keeps_the_clock_and_counts_nothing() -> None:
    carry = Continuity()
    assert carry.held("lost").t == 0.0  # nothing seen yet
    carry.carry(half(5.0, [100, 200], 1.0, group=0))
    time.sleep(0.1)
    held = carry.held("lost the agent")
    assert held.warnings == ("lost the agent",) and held.t >= 5.1
    assert held.probes[0].count == 2 and held.probes[0].rate_hz == 0.0


def test_a_probe_new_after_the_break_starts_at_its_own_count() -> None:
    carry = Continuity()
    carry.carry(Snapshot(t=2.0, host="n"))
    carry.broke()
    fresh = carry.carry(half(1.0, [300], 0.5, group=0))
    assert fresh.probes[0].count == 1 and fresh.devices[0].energy_j == 0.5


def test_what_an_agent_sends_is_carried_only_when_it_makes_sense() -> None:
    """A hostile agent (or node) sends figures that parse: a negative count, a bucket
    past the last, values whose sum is not finite. Seen: ZeroDivisionError, an
    OverflowError in the percentiles, and `Infinity` written to a recording."""
    carry = Continuity()
    carry.carry(half(1.7e308, [100], 1.7e308, group=0))
    base = carry.carry(half(1.7e308, [100], 1.7e308, group=0))
    bad_count = replace(base.probes[0], count=-5, hist=((100_000, 1),))
    carry.carry(replace(base, probes=(bad_count,)))
    carry.broke()
    after = carry.carry(half(1.7e308, [100, 200, 300, 400, 500], 1.7e308, group=0))
    p = after.probes[0]
    # The negative count was dropped (the sane 1 before it stood), so the break adds to 1.
    assert p.count == 6 and p.hist == half(0, [100, 100, 200, 300, 400, 500], 0, 0).probes[0].hist
    assert math.isfinite(after.t) and math.isfinite(after.devices[0].energy_j or 0.0)


def test_a_probe_removed_then_added_again_starts_from_zero() -> None:
    carry = Continuity()
    carry.carry(half(2.0, [100, 200], 1.0, group=0))
    carry.broke()
    carry.forget("uprobe:/bin/x:f")
    assert carry.carry(half(1.0, [300], 0.5, group=0)).probes[0].count == 1


def test_no_two_lines_of_a_run_share_a_time() -> None:
    # Seen once under load: the held line that says the agent is back, and the new
    # session's first snapshot (t=0 there, set to "now" by broke()), in the same ms.
    carry = Continuity()
    first = carry.carry(half(3.0, [100], 1.0, group=0))
    held = carry.held("lost the agent; retrying")
    carry.broke()
    after = carry.carry(half(0.0, [200], 1.0, group=1))
    again = carry.held("lost the agent; retrying")
    times = [first.t, held.t, after.t, again.t]
    assert times == sorted(times) and len(set(times)) == len(times), times


def test_impossible_figures_within_a_session_are_dropped_and_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seen from a hostile agent: counts of 1e30 and going back, energy 40 J then
    -460 J, a clock that crawls 1 ms a snapshot. The last sane figure stands, and one
    line says what was dropped."""
    clock = [100.0]
    monkeypatch.setattr(agent_continuity, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    carry = Continuity()
    good = carry.carry(half(1.0, [100, 200], 40.0, group=0))
    assert not good.warnings
    clock[0] += 10.0  # the client's 10 s; the agent says 1 ms
    p = good.probes[0]
    bad = replace(
        good,
        t=1.001,
        probes=(replace(p, count=10**30), replace(p, name="g", count=-3)),
        devices=(replace(good.devices[0], energy_j=-460.0, power_w=math.inf, util=7.0),),
    )
    seen = carry.carry(bad)
    assert [q.count for q in seen.probes] == [2]  # 1e30 held at 2; -3 never shown
    d = seen.devices[0]
    assert (d.energy_j, d.power_w, d.util) == (40.0, None, None)
    assert seen.t == 11.0  # the client's clock, not the crawl
    (line,) = seen.warnings
    assert line.startswith("dropped what the agent sent that cannot be:") and "more" in line
    back = carry.carry(replace(good, t=seen.t + 0.1, probes=(replace(p, count=1),)))
    assert back.probes[0].count == 2 and "going back" in back.warnings[0]
    carry.broke()  # a new session: its counts start again
    assert carry.carry(half(0.1, [300], 1.0, group=1)).warnings == ()


def sampled(snap: Snapshot, count: int) -> Snapshot:
    """SNAP's probe as a sampled row (an opencl kernel's): COUNT launches, its samples
    the ones timed."""
    p = snap.probes[0]
    return replace(snap, probes=(replace(p, kind="opencl", count=count, timed=p.count),))


def test_a_sampled_rows_means_weigh_its_timed_hits_across_a_break() -> None:
    """Before: 2 of 1,000 launches timed at 100 ns; after: 2 of 10 at 1,000 ns. The
    mean is 550 ns (by the 4 timed), not ~109 ns (by the launches)."""
    carry = Continuity()
    carry.carry(sampled(half(1.0, [100, 100], 1.0, group=0), 1000))
    carry.broke()
    p = carry.carry(sampled(half(1.0, [1000, 1000], 1.0, group=1), 10)).probes[0]
    assert (p.count, p.timed) == (1010, 4)
    assert p.raw is not None and p.raw.mean_ns == pytest.approx(550.0)


def test_an_agents_timed_hits_past_its_count_are_dropped() -> None:
    carry = Continuity()
    good = carry.carry(sampled(half(1.0, [100, 200], 1.0, group=0), 5))
    bad = carry.carry(replace(good, t=1.5, probes=(replace(good.probes[0], timed=9),)))
    assert bad.probes[0].timed == 2 and "9 timed of 5" in bad.warnings[0]


def test_a_held_line_adds_no_samples_to_the_profile() -> None:
    """Once the agent ends a session (its target became another's), every line after is
    held: the last interval's stacks are not repeated in each (an export would count them
    once a line)."""
    from adaptyst_top.snapshot import ProfileFunction
    from adaptyst_top.snapshot.profile import ProfilePart, ProfileStack

    c = Continuity()
    part = ProfilePart(
        hz=99,
        samples=40,
        functions=(ProfileFunction("f", "/app", "f", 40, 40),),
        stacks=(ProfileStack(1, 1, ("main", "f"), samples=40),),
    )
    c.carry(Snapshot(t=1.0, host="h", profile=part))
    for _ in range(3):
        held = c.held("the agent ended this session", ended=True)
        assert held.profile is not None and held.profile.stacks == ()
        assert held.profile.samples == 40 and held.profile.functions == part.functions
