from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from adaptyst_top.collectors.energy.account import STALE_AFTER_S, EnergyAccount


def test_counter_deltas_and_implied_power() -> None:
    a = EnergyAccount("nvml")
    assert a.update(0.0, counter_j=1000.0).energy_j == 0.0
    r = a.update(1.0, counter_j=1300.0)
    assert (
        r.energy_j == 300.0 and r.power_w == 300.0 and (r.source, r.method) == ("nvml", "counter")
    )


def test_wrap_with_known_range() -> None:
    a = EnergyAccount("rapl")
    a.update(0.0, counter_j=262_000.0, counter_range_j=262_143.328850)
    r = a.update(1.0, counter_j=50.0, counter_range_j=262_143.328850)
    assert abs(r.energy_j - (143.32885 + 50.0)) < 1e-6
    assert a.wraps == 1 and a.resets == 0


def test_backwards_without_range_is_a_reset() -> None:
    a = EnergyAccount("nvml")
    a.update(0.0, counter_j=5000.0)
    r = a.update(1.0, counter_j=120.0)  # driver reloaded: counting from zero again
    assert r.energy_j == 120.0 and a.resets == 1


def test_implausible_wrap_is_a_reset() -> None:
    a = EnergyAccount("rapl")
    a.update(0.0, counter_j=10.0, counter_range_j=262_143.0)
    r = a.update(1.0, counter_j=5.0, counter_range_j=262_143.0)  # 262 kJ in 1 s: no
    assert r.energy_j == 5.0 and a.resets == 1 and a.wraps == 0


def test_stale_counter_falls_back_to_power() -> None:
    a = EnergyAccount("nvml")
    a.update(0.0, counter_j=100.0, power_w=200.0)
    t = 0.0
    while t < STALE_AFTER_S + 1:
        t += 1.0
        r = a.update(t, counter_j=100.0, power_w=200.0)
    assert (r.source, r.method) == ("nvml", "power")
    # Intervals ending once the counter has been still for STALE_AFTER_S come from power.
    assert r.energy_j == 200.0 * (t - STALE_AFTER_S + 1)


def test_power_only_trapezoid() -> None:
    a = EnergyAccount("xrt")
    assert a.update(0.0, power_w=10.0).method == "power"
    r = a.update(2.0, power_w=30.0)
    assert r.energy_j == 40.0 and (r.source, r.method) == ("xrt", "power")


def test_nothing_measurable_is_none_not_zero() -> None:
    a = EnergyAccount("nvml")
    assert a.update(0.0).energy_j is None
    assert a.update(1.0).energy_j is None


@given(st.lists(st.floats(min_value=0, max_value=500), min_size=2, max_size=50))
def test_monotone_counter_sums_exactly(increments: list[float]) -> None:
    a = EnergyAccount("nvml")
    counter = 1e6
    a.update(0.0, counter_j=counter)
    for i, inc in enumerate(increments, 1):
        counter += inc
        r = a.update(float(i), counter_j=counter)
    assert abs(r.energy_j - sum(increments)) < 1e-6 * max(1.0, sum(increments))


def test_counter_read_now_and_then_replaces_the_power_estimate() -> None:
    # Power fills in between two readings of the counter; the counter's delta replaces
    # that estimate, and the energy shown never goes backwards.
    a = EnergyAccount("nvml")
    a.update(0.0, counter_j=1000.0, power_w=100.0)
    for t in range(1, 5):
        r = a.update(float(t), power_w=100.0)
        assert (r.energy_j, r.method) == (100.0 * t, "power")
    r = a.update(5.0, counter_j=1350.0, power_w=100.0)  # 350 J: below the 400 J shown
    assert (r.energy_j, r.method) == (400.0, "counter")  # held, not taken back
    r = a.update(6.0, power_w=100.0)
    assert r.energy_j == 450.0  # the counter's 350 + 100 since
    r = a.update(10.0, counter_j=2100.0, power_w=100.0)  # 750 J more: above the estimate
    assert (r.energy_j, r.method) == (1100.0, "counter")
