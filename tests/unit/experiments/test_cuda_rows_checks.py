"""experiments/gpu/cuda_rows.py's checks (the H200's cuda_kernels part) on runs made up
to the shape cuda_kernels_app.py and `record` write: each passes on a faithful run and
fails on the fault it is there to catch."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from adaptyst_top.collectors.probes.kinds.device_layer import shown_name
from experiments.gpu.cuda_rows import (
    LEAK_KIB,
    cost_check,
    counts_match,
    memory_check,
    rows_check,
)

LONG = "adaptyst_check_spin_with_a_name_past_the_key"


@pytest.fixture
def run() -> tuple[dict[str, Any], dict[str, Any]]:
    own = {
        "launches": {"spin_short": 1500, "spin_long": 300, LONG: 600},
        "event_ms": {"spin_short": 226.0, "spin_long": 375.5, LONG: 121.2},
    }
    probes = [
        {
            "name": shown_name(k),
            "count": n,
            "timed": n,
            "mean_ns": own["event_ms"][k] * 1e6 / n * 0.99,
        }
        for k, n in own["launches"].items()
    ]
    return own, {"probes": [*probes, {"name": "[memset]", "count": 2, "timed": 2}]}


def test_rows_pass_when_counts_are_equal_and_times_agree(
    run: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    own, snap = run
    got = rows_check(own, snap)
    assert got["verdict"] == "pass" and got["counts_equal"] and "failed" not in got
    assert got["names"][LONG]["device_over_events"] == pytest.approx(0.99, abs=1e-3)
    assert got["other_rows"] == {"[memset]": 2} and counts_match(own, snap)


@pytest.mark.parametrize("fault", ["lost_launch", "slow_clock", "untimed", "long_name_cut"])
def test_rows_fail_on_each_fault(run: tuple[dict[str, Any], dict[str, Any]], fault: str) -> None:
    own, snap = copy.deepcopy(run)
    row = next(p for p in snap["probes"] if p["name"] == shown_name(LONG))
    if fault == "lost_launch":
        row["count"] -= 1
    elif fault == "slow_clock":  # device time 7% off the events
        row["mean_ns"] *= 1.07 / 0.99
    elif fault == "untimed":
        row["timed"] -= 10
    else:  # the row named by the first 31 bytes alone
        row["name"] = LONG[:31]
    got = rows_check(own, snap)
    assert got["verdict"] == "fail" and "failed" in got
    if fault == "lost_launch":
        assert not counts_match(own, snap)


def test_cost_is_the_median_rate_under_record_over_alone() -> None:
    ok = cost_check([100_000, 104_000, 98_000], [99_000, 97_500, 101_000])
    assert ok["verdict"] == "pass" and ok["ratio"] == pytest.approx(99_000 / 100_000)
    slow = cost_check([100_000, 104_000, 98_000], [90_000, 93_000, 94_000])
    assert slow["verdict"] == "fail" and "failed" in slow


def test_memory_is_what_grows_under_record_beyond_alone() -> None:
    alone = {
        "rss_kib_plain": [500_000, 500_100, 500_100, 500_150],
        "rss_kib_graph": [500_200, 500_300, 500_300, 500_400],
    }
    # The pool filling early (8 MiB) is no leak; growing after it is.
    flat = {
        "rss_kib_plain": [500_000, 508_000, 508_100, 508_300],
        "rss_kib_graph": [510_000, 510_200, 510_200, 510_300],
    }
    got = memory_check(alone, flat)
    assert all(got[s]["verdict"] == "pass" for s in ("rss_kib_plain", "rss_kib_graph"))
    leak = copy.deepcopy(flat)
    leak["rss_kib_graph"][-1] += LEAK_KIB + 1
    bad = memory_check(alone, leak)
    assert bad["rss_kib_graph"]["verdict"] == "fail" and "failed" in bad["rss_kib_graph"]
    assert bad["rss_kib_plain"]["verdict"] == "pass"
