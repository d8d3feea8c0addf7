"""Net latencies (collectors/probes/engine/output.py): the probe's cost inside a call is never
subtracted past the fastest call's raw figure (a figure that says the probe alone took
longer than a call is wrong for this node now, and a net p50 of 0 read as truth)."""

from __future__ import annotations

from adaptyst_top.collectors.probes.cost.class_cost import LEAST_KEPT, ClassCost
from adaptyst_top.collectors.probes.engine.output import latency_fields
from adaptyst_top.snapshot.histogram import bucket_of


def test_the_subtraction_stops_at_the_raw_minimum() -> None:
    # gzip's read as a newcomer saw it: raw min 15.1 us, the cached class cost 28.9 us.
    calls = [15_100 + 100 * i for i in range(100)]
    hist: dict[int, int] = {}
    for c in calls:
        hist[bucket_of(c)] = hist.get(bucket_of(c), 0) + 1
    cost = ClassCost(per_hit_ns=34_000.0, in_interval_ns=28_900.0, source="calibrated")
    net, raw, off = latency_fields(len(calls), sum(calls), min(calls), max(calls), hist, cost)
    assert net.min_ns == 0.0 and off == 15_100.0  # the row says so: 13.8 us under the class
    assert net.p50_ns is not None and raw.p50_ns is not None and raw.min_ns is not None
    assert net.p50_ns == round(raw.p50_ns - raw.min_ns, 1) > 0  # was 0: p50 below the cost
    assert net.max_ns == round(raw.max_ns - raw.min_ns, 1)  # type: ignore[operator]


def test_below_the_raw_minimum_the_class_cost_is_subtracted_whole() -> None:
    hist = {bucket_of(50_000): 10}
    cost = ClassCost(per_hit_ns=1500.0, in_interval_ns=700.0, source="calibrated")
    net, _, off = latency_fields(10, 500_000, 50_000, 50_000, hist, cost)
    assert net.mean_ns == 49_300.0 and net.min_ns == 49_300.0 and off == 700.0


def test_a_row_says_what_was_taken_off_and_when_it_was_capped() -> None:
    from adaptyst_top.collectors.probes.engine.output import _corrected

    cost = ClassCost(per_hit_ns=34_000.0, in_interval_ns=28_900.0, source="calibrated")
    assert _corrected(15_100.0, cost) == 13_800.0
    assert _corrected(28_900.0, cost) is None and _corrected(None, cost) is None


def test_the_fastest_call_is_net_of_the_least_the_probe_took() -> None:
    # A 20 us function: its median net of the class's median cost, its fastest call net
    # of the least the calibration saw (with a quarter kept back), never of the median.
    calls = [20_600 + 10 * i for i in range(200)]
    hist: dict[int, int] = {}
    for c in calls:
        hist[bucket_of(c)] = hist.get(bucket_of(c), 0) + 1
    cost = ClassCost(1500.0, 600.0, "calibrated", least_in_interval_ns=500.0)
    net, raw, off = latency_fields(len(calls), sum(calls), min(calls), max(calls), hist, cost)
    assert off == 600.0 and raw.min_ns == 20_600.0
    assert net.min_ns == 20_600.0 - LEAST_KEPT * 500.0
    assert net.p50_ns is not None and net.min_ns <= net.p50_ns
    # Unknown least (a default figure): the median, a quarter kept back.
    cost = ClassCost(1500.0, 600.0, "default")
    assert latency_fields(len(calls), sum(calls), 20_600, 22_590, hist, cost)[0].min_ns == 20_150.0


def test_calls_no_longer_than_the_probe_itself_read_zero_not_an_error() -> None:
    # Every call as short as the probe's own cost: mean, p50 and the minimum net of it
    # are all 0 (a record run raised TypeError here, min() of one float).
    hist = {bucket_of(500): 40}
    cost = ClassCost(1500.0, 700.0, "calibrated", least_in_interval_ns=600.0)
    net, raw, off = latency_fields(40, 40 * 500, 500, 500, hist, cost)
    assert (net.mean_ns, net.p50_ns, net.min_ns, off) == (0.0, 0.0, 0.0, 500.0)
    assert raw.min_ns == 500.0
