"""The task screen's figures from the learner's curves (a predicted median with a
one-sigma band instead of a fit): lines drawn from the band, crossovers found on it,
and each device's time in the advisor pane with its spread."""

from __future__ import annotations

import math

from adaptyst_top.snapshot import Curve, TaskEntry
from adaptyst_top.tui.advisor_rows import device_times
from adaptyst_top.tui.task_plot_data import band, crossovers, fitted


def learnt(device: str, per_item_s: float, latency_s: float) -> Curve:
    sizes = [10.0 ** (2 + i / 4) for i in range(17)]  # 100 .. 1e6
    return Curve(
        device,
        ((1e3, latency_s + 1e3 * per_item_s),),
        None,
        tuple((n, latency_s + n * per_item_s, 1.2) for n in sizes),
    )


def test_the_band_draws_the_line_and_its_sigma_either_way() -> None:
    c = learnt("cpu", 1e-8, 1e-6)
    xs, mid = fitted(c, 1.0, 2.0)  # no fit: the band's medians, whatever the span
    _, lo = band(c, -1)
    _, hi = band(c, 1)
    assert len(xs) == len(mid) == len(lo) == len(hi) == 17
    assert all(a < m < b for a, m, b in zip(lo, mid, hi, strict=True))
    assert math.isclose(hi[0] / mid[0], 1.2)


def test_crossovers_are_found_on_the_learners_medians() -> None:
    cpu = learnt("cpu", 1e-8, 1e-6)  # no latency, slow per item
    gpu = learnt("cuda", 1e-10, 1e-4)  # a launch's latency, fast per item
    ((n, below, above),) = crossovers((cpu, gpu))
    # 1e-6 + n*1e-8 = 1e-4 + n*1e-10 at n = 1e4 (log-linear between the band's points)
    assert (below, above) == ("cpu", "cuda") and 8e3 < n < 1.2e4


def test_a_hostile_band_draws_nothing_and_crashes_nothing() -> None:
    bad = Curve("x", (), None, ((math.nan, 1.0, 1.1), (10.0, math.inf, 1.1), (20.0, 1.0, 0.5)))
    assert band(bad, 1) == ([], []) and crossovers((bad, learnt("cpu", 1e-8, 1e-6))) == []


def test_the_pane_says_each_prediction_with_its_spread() -> None:
    t = TaskEntry(
        "spmv",
        "cpu",
        10,
        (16, 2),
        {
            "cpu": {"time_s": 2e-3, "source": "measured", "time_factor": 1.08},
            "opencl:0": {"time_s": 5e-4, "source": "fit", "time_factor": 1.5},
            "old": {"time_s": 1e-3, "source": "fit"},  # the advisor's recordings: no factor
        },
    )
    assert device_times(t) == "opencl:0 ~500 µs ±50% · old ~1 ms · cpu 2 ms ±8%"
    wide = TaskEntry("t", "cpu", 1, (10, 0), {"gpu": {"time_s": 1e-3, "time_factor": 12.37}})
    assert device_times(wide) == "gpu 1 ms ×12" and device_times(wide, True) == "gpu 1 ms x12"
