"""Off-CPU intervals in the tally (collectors/profile/tally.py): each charged to the stack
its thread switched out with. An OFF_SUM (intervals the kernel summed since a copy) names
the copy it stands for; with that copy lost or dropped it is charged to no stack, never
to the thread's older one."""

from __future__ import annotations

import pytest

from adaptyst_top.collectors.profile import tally as tally_mod
from adaptyst_top.collectors.profile.sampler import (
    OFF_END,
    OFF_START,
    OFF_SUM,
    Event,
    decode,
    encode,
)
from adaptyst_top.collectors.profile.unwind import Frame, Stack

TID = PID = 4242


def _stacks(monkeypatch: pytest.MonkeyPatch, t: tally_mod.Tally) -> None:
    """Each OFF_START's stack named by its ip (no process to unwind here)."""

    def stack_of(e: Event) -> Stack:
        return Stack((Frame("/bin/x", f"f{e.ip}"), Frame("/bin/x", "main")), True)

    monkeypatch.setattr(t, "_stack_of", stack_of)


def _off(t: tally_mod.Tally) -> tuple[dict[str, float], float]:
    """Blocked ns by leaf, and in all."""
    part = t.part(99)
    return {s.frames[-1]: s.off_ns for s in part.stacks}, part.off_ns


def test_an_off_sum_is_charged_to_the_copy_it_names_only(monkeypatch: pytest.MonkeyPatch) -> None:
    t = tally_mod.Tally()
    _stacks(monkeypatch, t)
    t.take(Event(OFF_START, PID, TID, 100, ip=1))  # copied at t=100, in f1
    t.take(Event(OFF_END, 0, TID, 100, off_ns=10))
    # Two intervals from the same place as the t=100 copy (20 blocked, 5 preempted) and
    # one preemption from elsewhere (7: on no stack), summed by the kernel.
    t.take(Event(OFF_SUM, PID, TID, 250, ip=100, sp=3, sums=(20, 5, 7)))
    # A copy at t=300 (in f2) was lost: its sum must not land on f1's.
    t.take(Event(OFF_SUM, PID, TID, 400, ip=300, sp=1, sums=(1000, 0, 0)))
    # An interval whose copy the kernel could not keep: on no stack.
    t.take(Event(OFF_END, 0, TID, 0, off_ns=3))
    by_leaf, blocked = _off(t)
    assert by_leaf == {"f1": 30}
    part = t.part(99)
    assert blocked == 1033 and part.runnable_ns == 12  # every interval, on a stack or not
    assert {s.frames[-1]: s.runnable_ns for s in part.stacks} in ({}, {"f1": 0.0})


def test_a_sum_survives_the_agents_encoding() -> None:
    e = Event(OFF_SUM, PID, TID, 250, ip=100, sp=3, sums=(20, 5, 7))
    assert decode(encode(e)) == e
