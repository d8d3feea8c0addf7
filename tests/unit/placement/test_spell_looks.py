"""A device another job slowed for a while is looked at again once the job may have left
(spell_looks.py): one call at a time, in rounds, and as the monitor's advisor."""

from __future__ import annotations

import math
import random

import pytest

from adaptyst_top.placement.cost_model import DRIFT_VAR, TIME, CostModel
from adaptyst_top.placement.learned_advisor import LOOK_RUNS, LearnedAdvisor
from adaptyst_top.placement.learner import Learner
from adaptyst_top.placement.spell_looks import RELOOK_FIRST, SpellLooks

SIZE = 1 << 16
FAST, OTHER, SPELL = 1e-4, 1.5e-4, 4.0  # the gpu's, the cpu's; the gpu x4 for a while


def cost(device: str, i: int, spell: range, rng: random.Random) -> float:
    t = FAST if device == "gpu" else OTHER
    if device == "gpu" and i in spell:
        t *= SPELL
    return t * math.exp(rng.gauss(0, 0.05))


def back_after(learner: Learner, spell: range, calls: int = 400) -> int | None:
    """Calls after SPELL ended until the task is on the gpu for 10 calls in a row."""
    rng = random.Random(5)
    streak = 0
    for i in range(calls):
        d = learner.choose("t", SIZE)
        learner.observe("t", d, SIZE, cost(d, i, spell, rng))
        streak = streak + 1 if d == "gpu" and i >= spell.stop else 0
        if streak == 10:
            return i - 9 - spell.stop
    return None


def test_after_a_spell_the_task_goes_back_and_without_looks_it_would_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spell = range(60, 120)
    back = back_after(Learner(["cpu", "gpu"], seed=1), spell)
    # Looked at RELOOK_FIRST calls after the rise was confirmed, then after 2x, 4x...:
    # the first look after the spell's end is within twice its length.
    assert back is not None and back <= 2 * len(spell), back
    monkeypatch.setattr(SpellLooks, "due", lambda *a: None)
    assert back_after(Learner(["cpu", "gpu"], seed=1), spell) is None


def test_the_calm_state_is_kept_through_the_rise_and_put_back_aged() -> None:
    m = CostModel(level=math.log(FAST))
    rng = random.Random(2)
    for _ in range(30):
        m.observe(SIZE, math.log(FAST * math.exp(rng.gauss(0, 0.05))))
    calm, noise = m.predict(SIZE)[0], m.noise
    assert m.calm is None and m.predict_calm(SIZE) is None
    aged = 30
    while not m.observe(SIZE, math.log(SPELL * FAST)):
        aged += 1
        m.age(aged)
    assert m.calm is not None and m.predict_calm(SIZE) == pytest.approx(calm, abs=0.05)
    kept = (m.calm.mean.copy(), m.calm.cov.copy(), m.calm.aged)
    for _ in range(20):  # what it learns of the spell, and its ageing, leave it alone
        aged += 1
        m.age(aged)
        m.observe(SIZE, math.log(SPELL * FAST))
    assert m.predict(SIZE)[0] == pytest.approx(math.log(SPELL * FAST), abs=0.1)
    assert (m.calm.mean == kept[0]).all() and (m.calm.cov == kept[1]).all()
    assert m.noise > 2 * noise  # the rise's runs before it was confirmed
    m.restore_calm()
    assert m.calm is None and m.predict(SIZE)[0] == pytest.approx(calm, abs=0.05)
    assert m.noise == pytest.approx(noise, rel=0.3)
    # The calls since the rise began aged it, as they would have without the spell.
    assert (m.cov.diagonal() - kept[1].diagonal()) == pytest.approx((aged - kept[2]) * DRIFT_VAR)


def test_a_cost_seen_to_fall_leaves_nothing_to_go_back_to() -> None:
    m = CostModel(level=math.log(FAST))
    for _ in range(10):
        m.observe(SIZE, math.log(FAST))
    while not m.observe(SIZE, math.log(SPELL * FAST)):
        pass
    assert m.calm is not None
    while not m.observe(SIZE, math.log(FAST / SPELL)):
        pass
    assert m.calm is None


def slowed(learner: Learner) -> None:
    """gpu fast, then 4x slower until the rise is confirmed and the task left it."""
    learner.observe("t", "cpu", SIZE, OTHER)
    for _ in range(20):
        learner.observe("t", "gpu", SIZE, FAST)
    while not learner.observe("t", "gpu", SIZE, SPELL * FAST):
        pass
    for _ in range(RELOOK_FIRST):
        learner.observe("t", "cpu", SIZE, OTHER)


def test_a_round_gives_the_slowed_device_one_call_back() -> None:
    learner = Learner(["cpu", "gpu"], seed=3)
    slowed(learner)
    looks: list[bool] = []
    placed = learner.place_round("t", [SIZE] * 8, looks=looks)
    assert [d for d, look in zip(placed, looks, strict=True) if look] == ["gpu"], placed
    learner.observe("t", "gpu", SIZE, FAST)  # the other job has gone: looked at again
    assert learner.models[("t", "gpu", TIME)].calm is not None
    assert learner.choose("t", SIZE) == "gpu"
    learner.observe("t", "gpu", SIZE, FAST)
    assert learner.models[("t", "gpu", TIME)].calm is None
    assert learner.place_round("t", [SIZE] * 8).count("gpu") >= 4


def test_a_look_back_that_finds_it_still_slow_waits_twice_as_long() -> None:
    learner = Learner(["cpu", "gpu"], seed=4)
    slowed(learner)
    pool = ["cpu", "gpu"]
    assert learner.spells.due(learner, "t", SIZE, pool) == "gpu"
    assert learner.spells.due(learner, "t", SIZE, pool) == "gpu"  # asking sends nothing
    assert learner.choose("t", SIZE) == "gpu"
    learner.observe("t", "gpu", SIZE, SPELL * FAST)  # still taken
    for _ in range(2 * RELOOK_FIRST - 1):
        assert learner.spells.due(learner, "t", SIZE, pool) is None
        learner.observe("t", "cpu", SIZE, OTHER)
    assert learner.spells.due(learner, "t", SIZE, pool) == "gpu"


def test_a_new_rise_starts_its_own_backoff() -> None:
    learner, pool, cpu = Learner(["cpu", "gpu"], seed=6), ["cpu", "gpu"], 3 * FAST
    learner.observe("t", "cpu", SIZE, cpu)
    for t in [FAST] * 20 + [4 * FAST] * 12:  # another job on the gpu: the task leaves
        learner.observe("t", "gpu", SIZE, t)
    m = learner.models[("t", "gpu", TIME)]
    assert m.calm is not None
    for _ in range(3):  # three looks back, each finding it slow: a long wait now
        while learner.spells.due(learner, "t", SIZE, pool) is None:
            learner.observe("t", "cpu", SIZE, cpu)
        learner.look_sent("t", "gpu")
        learner.observe("t", "gpu", SIZE, 4 * FAST)
    while m.calm is not None:  # the job eases, no calm run seen: the rise is over
        learner.observe("t", "gpu", SIZE, 2.5 * FAST)
    for _ in range(10):
        learner.observe("t", "gpu", SIZE, 2.5 * FAST)
    while not learner.observe("t", "gpu", SIZE, 10 * FAST):  # another job, later
        pass
    for _ in range(RELOOK_FIRST):
        learner.observe("t", "cpu", SIZE, cpu)
    assert learner.spells.due(learner, "t", SIZE, pool) == "gpu"


def test_the_monitor_is_told_to_look_back_and_why() -> None:
    adv = LearnedAdvisor(["cpu", "opencl:0"])
    ctx = (16, 2)
    adv.observe("spmv", "cpu", ctx, OTHER, 50, 0.1, size=SIZE)
    adv.set_current("spmv", "cpu")
    for t in [FAST] * 6 + [SPELL * FAST] * 30:  # a move, then another job on it
        adv.observe("spmv", "opencl:0", ctx, t, 50, 0.1, size=SIZE)
        adv.set_current("spmv", "opencl:0")
    for _ in range(RELOOK_FIRST + 1):
        adv.observe("spmv", "cpu", ctx, OTHER, 50, 0.1, size=SIZE)
        adv.set_current("spmv", "cpu")
        advice = adv.decide("spmv")
        if advice is not None and advice.explore:
            break
    assert advice is not None and advice.explore and advice.suggested == "opencl:0"
    assert "again" in advice.why and advice.runs == LOOK_RUNS
    again = adv.decide("spmv")  # not taken: still offered, nothing spent on it
    assert again is not None and again.suggested == "opencl:0" and "again" in again.why
