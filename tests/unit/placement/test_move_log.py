"""The advisor as a user reads it: the gain each move predicted against the gain
measured after it, the device the models say for a task, and the plot's crossovers."""

from __future__ import annotations

import math

import pytest

from adaptyst_top.placement.move_log import KEPT, MoveLog
from adaptyst_top.snapshot import Curve, Move, Snapshot, TaskEntry
from adaptyst_top.tui.task_plot_data import crossovers, energy_points, fitted
from experiments.placement.baseline.advisor import Advisor
from experiments.placement.baseline.model import Prediction
from experiments.placement.baseline.task_view import task_entries


def test_the_gain_measured_counts_the_runs_after_the_move_where_it_went() -> None:
    log = MoveLog(Advisor(["cpu", "opencl:0"]).cost)
    before = Prediction(0.010, None, 0.05, 20, "measured")
    log.moved(Move("gemm", "cpu", "opencl:0", False, 1, t=3.0), (10, 0), before, 0.55)
    log.ran("gemm", "opencl:0", (10, 0), 0.004, 5, None)
    log.ran("gemm", "opencl:0", (11, 0), 0.5, 5, None)  # another input: not this move's
    log.ran("gemm", "cpu", (10, 0), 0.5, 5, None)  # the device it left
    log.ran("spmv", "opencl:0", (10, 0), 0.5, 5, None)  # another task
    (m,) = log.moves()
    assert (m.predicted_gain, m.measured_gain, m.runs, m.t) == (0.55, 0.6, 5, 3.0)
    # The next move of the task closes this one: later runs count for the new one.
    log.moved(Move("gemm", "opencl:0", "cpu", False, 1), (10, 0), None, 0.1)
    log.ran("gemm", "opencl:0", (10, 0), 0.010, 5, None)
    first, second = log.moves()
    assert first.runs == 5 and second.runs == 0 and second.measured_gain is None


def test_energy_is_measured_in_the_objectives_terms_and_the_log_is_bounded() -> None:
    log = MoveLog(Advisor(["cpu", "gpu:0"], objective="energy").cost)
    log.moved(
        Move("t", "cpu", "gpu:0", False, 1), (1, 0), Prediction(1.0, 4.0, 0, 9, "measured"), 0.5
    )
    log.ran("t", "gpu:0", (1, 0), 0.5, 4, 3.0)  # faster, but the energy saved is 25%
    assert log.moves()[0].measured_gain == 0.25
    for i in range(KEPT + 5):
        log.moved(Move(f"t{i}", "cpu", "gpu:0", True, 0), (1, 0), None, None)
    assert len(log.moves()) == KEPT


def test_a_task_says_its_best_device_gain_state_and_curves() -> None:
    advisor = Advisor(["cpu", "opencl:0"])
    for sb, cpu_s, ocl_s in [(8, 1e-4, 1e-3), (12, 1.6e-3, 1.2e-3), (16, 2.6e-2, 4e-3)]:
        for device, s in (("cpu", cpu_s), ("opencl:0", ocl_s)):
            advisor.set_current("gemm", device)
            advisor.observe("gemm", device, (sb, 0), s, 4, None, size=2**sb)
    advisor.set_current("gemm", "cpu")
    (t,) = task_entries(advisor)
    # A better device measured, no move made yet: the row says what it waits for, never
    # `settled` beside a better device.
    assert t.device == "cpu" and t.best == "opencl:0" and t.state == "holding"
    assert t.gain == pytest.approx(1 - 4e-3 / 2.6e-2, abs=1e-3)
    assert t.confidence is not None and 0 <= t.confidence <= 1
    assert [c.device for c in t.curves] == ["cpu", "opencl:0"]
    assert [n for n, _ in t.curves[0].points] == [256.0, 4096.0, 65536.0]
    back = Snapshot.from_json(Snapshot(0.0, "h", tasks=(t,)).to_json())
    assert back.tasks == (t,)  # what the snapshot carries reads back the same


def test_crossovers_are_where_two_fitted_curves_cross() -> None:
    slow_start = Curve("opencl:0", ((10.0, 1e-3), (1e5, 2e-3)), (1e-8, 1.0, 1e-3))
    linear = Curve("cpu", ((10.0, 1e-5), (1e5, 0.1)), (1e-6, 1.0, 0.0))
    ((n, below, above),) = crossovers((slow_start, linear))
    assert n == pytest.approx(1e-3 / (1e-6 - 1e-8), rel=1e-6)
    assert (below, above) == ("cpu", "opencl:0")
    xs, ys = fitted(linear, 10.0, 1e5)
    assert xs[0] == pytest.approx(10.0) and xs[-1] == pytest.approx(1e5)
    assert ys[-1] == pytest.approx(0.1)
    assert crossovers((linear, Curve("gpu", ((10.0, 1.0),), None))) == []


def test_energy_points_mark_the_pareto_front() -> None:
    t = TaskEntry(
        "t",
        "cpu",
        5,
        (1, 0),
        {
            "cpu": {"time_s": 2.0, "energy_j": 1.0},
            "gpu:0": {"time_s": 1.0, "energy_j": 3.0},
            "fpga:0": {"time_s": 3.0, "energy_j": 2.0},
            "opencl:0": {"time_s": 1.5, "energy_j": None},
        },
        pareto=(("gpu:0", 1.0, 3.0), ("cpu", 2.0, 1.0)),
    )
    assert energy_points(t) == [
        ("gpu:0", 1.0, 3.0, True), ("cpu", 2.0, 1.0, True), ("fpga:0", 3.0, 2.0, False)
    ]  # fmt: skip


def test_a_task_settled_only_where_the_models_say_it_is_best() -> None:
    def state(cpu_s: float, ocl_s: float, ocl_runs: int) -> str:
        advisor = Advisor(["cpu", "opencl:0"])
        for device, s, runs in (("opencl:0", ocl_s, ocl_runs), ("cpu", cpu_s, 3)):
            advisor.set_current("spmv", device)
            for _ in range(runs):
                advisor.observe("spmv", device, (12, 0), s, 1, None, size=4096)
        (t,) = task_entries(advisor)
        return t.state

    assert state(1e-3, 2e-3, 3) == "settled"  # where it runs is the best
    assert state(1e-3, 0.97e-3, 3) == "in noise"  # 3% better: under the move threshold
    assert state(1e-3, 0.5e-3, 1) == "untried"  # one run there: not enough to move on


def test_a_fit_that_overflows_is_not_drawn() -> None:
    """An absurd fit (a crafted replay) overflowed to inf, which plotext cannot draw."""
    from adaptyst_top.tui.task_plot_data import log_ticks

    absurd = Curve("cpu", ((10.0, 1e-3), (1e6, 2e-3), (float("inf"), 1.0)), (1.0, 500.0, 0.0))
    xs, ys = fitted(absurd, 10.0, 1e6)
    assert all(math.isfinite(y) for y in ys) and len(xs) == len(ys)
    assert crossovers((absurd, Curve("gpu", ((10.0, 1e-3),), (1e-6, 1.0, 0.0)))) is not None
    assert log_ticks(1.0, math.inf) == [] and log_ticks(0.0, 1.0) == []
