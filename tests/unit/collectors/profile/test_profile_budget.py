"""The profile's budget: its cost in the target from its own samples, the tool's share of a
core, and the rate halved (never below MIN_HZ) when either is over."""

from __future__ import annotations

import pytest

from adaptyst_top.collectors.profile.budget import MIN_HZ, ProfileBudget, Reading


def test_the_share_is_the_kernel_time_over_the_cpu_time_the_samples_stand_for() -> None:
    b = ProfileBudget(0.02)
    assert b.update(Reading(0.0, 0, 0, 0.0), 99, 3000.0, 1000.0) is None
    # 99 samples (1 s of CPU at 99 Hz) at 3 us, 1,000 switch-outs at 1 us: 1.297 ms.
    assert b.update(Reading(1.0, 99, 1000, 0.01), 99, 3000.0, 1000.0) is None
    assert b.share == pytest.approx((99 * 3000 + 1000 * 1000) / 1e9)
    assert b.tool_share == pytest.approx(0.01)


def test_over_the_budget_the_rate_is_halved_and_said() -> None:
    b = ProfileBudget(0.001)
    b.update(Reading(0.0, 0, 0, 0.0), 999, 3000.0, 1000.0)
    lower = b.update(Reading(1.0, 999, 0, 0.0), 999, 3000.0, 1000.0)  # 0.3% > 0.1%
    assert lower == 499
    assert "lowered to 499 Hz" in b.said and "samples cost 0.3% of the target's CPU" in b.said
    assert b.share is None  # measured again at the new rate


def test_the_tools_own_unwinding_lowers_it_too_but_never_below_the_floor() -> None:
    b = ProfileBudget(0.02)
    b.update(Reading(0.0, 0, 0, 0.0), 40, None, None)
    # A start-up burst (first looks at the libraries) is no rate: judged over 10 s.
    assert b.update(Reading(1.0, 40, 0, 0.9), 40, None, None) is None
    for t in range(2, 10):
        assert b.update(Reading(float(t), 40 * t, 0, 0.9 + 0.2 * t), 40, None, None) is None
    assert b.update(Reading(10.0, 400, 0, 3.0), 40, None, None) == 20  # 30% of a core
    assert "unwinding took 30% of a core" in b.said
    for t in range(11, 21):
        b.update(Reading(float(t), 400 + 20 * t, 0, 3.0 + 0.5 * t), MIN_HZ, None, None)
    assert b.update(Reading(21.0, 900, 0, 14.0), MIN_HZ, None, None) is None


def test_an_interval_with_few_samples_keeps_the_last_share() -> None:
    b = ProfileBudget(0.02)
    b.update(Reading(0.0, 0, 0, 0.0), 99, 3000.0, 1000.0)
    b.update(Reading(1.0, 99, 0, 0.0), 99, 3000.0, 1000.0)
    kept = b.share
    # A sleeper: 2 samples, 5,000 switches: not enough CPU time to measure a share by.
    assert b.update(Reading(2.0, 101, 5000, 0.0), 99, 3000.0, 1000.0) is None
    assert b.share == kept


def test_switch_outs_over_the_budget_are_said_not_lowered() -> None:
    b = ProfileBudget(0.02)
    b.update(Reading(0.0, 0, 0, 0.0), 99, 3000.0, 1500.0)
    # 10% of a core (10 samples at 99 Hz) and 2,000 switch-outs: 3 ms of 101 ms.
    assert b.update(Reading(1.0, 10, 2000, 0.0), 99, 3000.0, 1500.0) is None
    assert b.share is not None and b.share > 0.02
    assert "in its switches, which a lower rate would not change" in b.said
