"""Models and advisor on simulated devices with known costs: deterministic."""

from __future__ import annotations

import math

import pytest
from adaptyst_top.placement.advisor import EXPLORE_RUNS, Advisor, TransferModel
from adaptyst_top.placement.model import Running, TaskDeviceModel, fit_power_law
from adaptyst_top.placement.task_api import feature_bucket, parse_key, size_bucket, task_key

# Two simulated devices: "cpu" cheap to start, linear; "acc" a launch cost, 5x faster per item.
COST = {"cpu": lambda n: 1e-6 * n, "acc": lambda n: 2e-4 + 2e-7 * n}
POWER = {"cpu": 30.0, "acc": 400.0}  # W while running


def feed(adv: Advisor, task: str, device: str, n: int, runs: int = 10) -> None:
    t = COST[device](n)
    adv.observe(task, device, (size_bucket(n), 0), t, runs, t * POWER[device], size=n)


def test_running_rejects_outliers_and_follows_drift() -> None:
    r = Running()
    for x in (1.0, 1.02, 0.98, 1.01, 0.99, 1.0):
        r.add(x)
    assert not r.add(50.0)  # one wild value: rejected
    assert r.rejected == 1 and math.isclose(r.mean, 1.0, rel_tol=0.02)
    for _ in range(4):  # the cost really moved
        r.add(3.0)
    assert math.isclose(r.mean, 3.0, rel_tol=0.05)


def test_power_law_fit_recovers_the_exponent() -> None:
    pts = [(float(n), 3e-9 * n**1.5 + 1e-4, 5) for n in (1e3, 4e3, 1.6e4, 6.4e4, 2.56e5)]
    _a, b, _c = fit_power_law(pts)  # type: ignore[misc]
    assert abs(b - 1.5) <= 0.1
    m = TaskDeviceModel("t", "cpu")
    for n, t, w in pts:
        m.observe((size_bucket(int(n)), 0), t, w, size=int(n))
    p = m.predict((size_bucket(10**6), 0), size=10**6)
    truth = 3e-9 * 1e6**1.5 + 1e-4
    assert p is not None and p.source == "fit" and abs(p.time_s - truth) / truth < 0.25


def test_moves_when_the_input_grows_and_back_when_it_shrinks() -> None:
    adv = Advisor(["cpu", "acc"], threshold=0.08, sustain=2, explore_every=8)
    feed(adv, "spmv", "cpu", 100)
    d = adv.decide("spmv")
    assert d is None or d.explore
    # Large inputs: acc unmeasured there -> a bounded exploration first.
    feed(adv, "spmv", "cpu", 100_000)
    a = adv.decide("spmv")
    assert a is not None and a.explore and a.suggested == "acc" and a.runs == EXPLORE_RUNS
    adv.accepted(a)
    feed(adv, "spmv", "acc", 100_000, runs=EXPLORE_RUNS)
    adv.set_current("spmv", "cpu")
    first = adv.decide("spmv")
    assert first is None  # hysteresis: one decision is not enough
    move = adv.decide("spmv")
    assert move is not None and not move.explore and move.suggested == "acc"
    assert move.time_gain > 0.5 and move.predicted["acc"]["samples"] == EXPLORE_RUNS
    assert "acc" in move.why and "runs" in move.why
    adv.accepted(move)
    assert adv.tasks["spmv"].current == "acc"
    # Small inputs again: acc's launch cost dominates; cpu was measured there before.
    feed(adv, "spmv", "acc", 100)
    feed(adv, "spmv", "cpu", 100)
    adv.set_current("spmv", "acc")
    decisions = [adv.decide("spmv") for _ in range(3)]
    back = next(d for d in decisions if d is not None)
    assert back.suggested == "cpu" and not back.explore


def test_small_gains_do_not_flap() -> None:
    adv = Advisor(["cpu", "acc"], threshold=0.10)
    ctx = (10, 0)
    for _ in range(20):
        adv.observe("t", "cpu", ctx, 1.00, 5)
        adv.observe("t", "acc", ctx, 0.95, 5)  # 5% better: under the threshold
        adv.set_current("t", "cpu")
        assert adv.decide("t") is None


def test_energy_objective_keeps_the_frugal_device() -> None:
    n = 100_000
    for objective, expected in (("time", "acc"), ("energy", "cpu")):
        adv = Advisor(["cpu", "acc"], objective=objective)  # type: ignore[arg-type]
        feed(adv, "t", "cpu", n)
        feed(adv, "t", "acc", n)
        adv.set_current("t", "cpu" if expected == "acc" else "acc")
        advice = [adv.decide("t") for _ in range(3)]
        got = {a.suggested for a in advice if a is not None}
        assert got == {expected}, (objective, advice)


def test_memory_constraint_excludes_a_device() -> None:
    adv = Advisor(["cpu", "acc"], memory_bytes={"acc": 1024}, transfer=TransferModel())
    feed(adv, "t", "cpu", 100_000)
    feed(adv, "t", "acc", 100_000)
    adv.set_current("t", "cpu")
    assert all(adv.decide("t") is None for _ in range(4))


def test_pareto_front() -> None:
    adv = Advisor(["cpu", "acc", "slow"])
    ctx = (12, 0)
    adv.observe("t", "cpu", ctx, 1.0, 5, 30.0)
    adv.observe("t", "acc", ctx, 0.2, 5, 40.0)
    adv.observe("t", "slow", ctx, 2.0, 5, 60.0)  # worse on both: dominated
    assert [d for d, _, _ in adv.pareto("t")] == ["acc", "cpu"]


def test_task_keys() -> None:
    key = task_key("spmv", "opencl:0", 3_000_000, 0.001)
    assert parse_key(key) == ("spmv", "opencl:0", 21, feature_bucket(0.001))
    assert len(task_key("a" * 40, "opencl:12", 10**12, 0.5)) <= 31
    assert parse_key("nonsense") is None
    assert feature_bucket(None) == 0 and feature_bucket(1.0) == 1
    with pytest.raises(ValueError):
        from adaptyst_top.placement.task_api import device_for

        device_for("x", 1, [])
