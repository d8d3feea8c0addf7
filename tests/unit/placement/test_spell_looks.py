"""A device another job slowed for a while is looked at again once the job may have left
(spell_looks.py): one call at a time, in rounds, and as the monitor's advisor."""

from __future__ import annotations

import math
import random

import pytest

from adaptyst_top.placement.cost_model import TIME, CostModel
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


def test_the_calm_weights_are_kept_through_the_rise_and_put_back() -> None:
    m = CostModel(level=math.log(FAST))
    rng = random.Random(2)
    for _ in range(30):
        m.observe(SIZE, math.log(FAST * math.exp(rng.gauss(0, 0.05))))
    calm = m.predict(SIZE)[0]
    assert m.calm is None and m.predict_calm(SIZE) is None
    while not m.observe(SIZE, math.log(SPELL * FAST)):
        pass
    assert m.predict_calm(SIZE) == pytest.approx(calm, abs=0.05)
    for k in range(20):  # what it learns of the spell, and its ageing, leave them alone
        m.observe(SIZE, math.log(SPELL * FAST))
        m.age(100 + k)
    assert m.predict(SIZE)[0] == pytest.approx(math.log(SPELL * FAST), abs=0.1)
    assert m.predict_calm(SIZE) == pytest.approx(calm, abs=0.05)
    m.restore_calm()
    assert m.calm is None and m.predict(SIZE)[0] == pytest.approx(calm, abs=0.05)


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
    learner.observe("t", "gpu", SIZE, FAST)  # the other job has gone
    assert learner.models[("t", "gpu", TIME)].calm is None
    assert learner.place_round("t", [SIZE] * 8).count("gpu") >= 4


def test_a_look_back_that_finds_it_still_slow_waits_twice_as_long() -> None:
    learner = Learner(["cpu", "gpu"], seed=4)
    slowed(learner)
    assert learner.choose("t", SIZE) == "gpu"
    learner.observe("t", "gpu", SIZE, SPELL * FAST)  # still taken
    waits = []
    for _ in range(4 * RELOOK_FIRST):
        d = learner.choose("t", SIZE)
        learner.observe("t", d, SIZE, SPELL * FAST if d == "gpu" else OTHER)
        waits.append(d == "gpu")
    assert waits.index(True) + 1 >= 2 * RELOOK_FIRST - 1, waits


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
