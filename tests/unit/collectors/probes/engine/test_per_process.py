"""A row counted per process: merged as one unsplit row reads, each process's share, and
the imbalance over them."""

from __future__ import annotations

from adaptyst_top.collectors.probes.engine.per_process import imbalance, merge, parts_of
from adaptyst_top.snapshot import Latency, ProcessPart


def _mean_net(count: int, total: int, lo: int, hi: int, buckets: dict[int, int]) -> Latency:
    return Latency(mean_ns=total / count if count else None, min_ns=lo, max_ns=hi)


def test_merged_figures_are_what_one_key_would_have_kept() -> None:
    # (count, sum, min, max, oncpu) per (pid, key), as reading.py files them.
    stats = {(10, None): (4, 400, 50, 200, 300), (11, None): (2, 600, 250, 350, 500)}
    hist = {(10, None): {3: 3, 5: 1}, (11, None): {5: 1, 7: 1}}
    rates = {(10, None): 4.0, (11, None): 2.0}
    m = merge(stats, hist, rates)
    assert m.stats == {None: (6, 1000, 50, 350, 800)}
    assert m.hist == {None: {3: 3, 5: 2, 7: 1}}
    assert m.rates == {None: 6.0}
    assert set(m.by_pid[None]) == {10, 11}


def test_keys_stay_apart_and_each_process_is_a_part() -> None:
    stats = {
        (10, "a"): (1, 10, 10, 10, 0),
        (10, "b"): (2, 20, 10, 10, 0),
        (11, "a"): (3, 90, 30, 30, 0),
    }
    m = merge(stats, {}, {})
    assert m.stats == {"a": (4, 100, 10, 30, 0), "b": (2, 20, 10, 10, 0)}
    parts, ratio, top = parts_of(m.by_pid["a"], True, _mean_net)
    assert [(p.pid, p.count, p.total_ns) for p in parts] == [(11, 3, 90.0), (10, 1, 10.0)]
    assert (ratio, top) == (round(90 / 50, 4), 11)
    # One process alone: no imbalance to speak of.
    assert parts_of(m.by_pid["b"], True, _mean_net)[1:] == (None, None)


def test_a_count_only_row_compares_hits() -> None:
    per_pid = {5: ((30, 0, 0, 0, 0), {}, 1.0), 6: ((10, 0, 0, 0, 0), {}, 0.5)}
    parts, ratio, top = parts_of(per_pid, False, _mean_net)
    assert [p.total_ns for p in parts] == [None, None]
    assert (ratio, top) == (1.5, 5)


def test_imbalance_of_nothing_is_none() -> None:
    idle = [ProcessPart(pid=1, total_ns=0.0), ProcessPart(pid=2, total_ns=0.0)]
    assert imbalance(idle) == (None, None)
    assert imbalance([]) == (None, None)
    even = [ProcessPart(pid=1, total_ns=5.0), ProcessPart(pid=2, total_ns=5.0)]
    assert imbalance(even) == (1.0, 1)  # a tie: the lower pid, every time
