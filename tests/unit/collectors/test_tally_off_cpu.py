"""Off-CPU intervals in the tally (collectors/profile/tally.py): each charged to the stack
its thread switched out with. An OFF_SAME names the copy it stands for; with that copy
lost or dropped it is charged to no stack, never to the thread's older one."""

from __future__ import annotations

import pytest

from adaptyst_top.collectors.profile import tally as tally_mod
from adaptyst_top.collectors.profile.sampler import OFF_END, OFF_SAME, OFF_START, Event
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


def test_an_off_same_is_charged_to_the_copy_it_names_only(monkeypatch: pytest.MonkeyPatch) -> None:
    t = tally_mod.Tally()
    _stacks(monkeypatch, t)
    t.take(Event(OFF_START, PID, TID, 100, ip=1))  # copied at t=100, in f1
    t.take(Event(OFF_END, 0, TID, 100, off_ns=10))
    t.take(Event(OFF_SAME, PID, TID, 200, ip=100))  # the same place as the t=100 copy
    t.take(Event(OFF_END, 0, TID, 200, off_ns=20))
    # A copy at t=300 (in f2) was lost: its OFF_SAME must not land on f1's.
    t.take(Event(OFF_SAME, PID, TID, 400, ip=300))
    t.take(Event(OFF_END, 0, TID, 400, off_ns=1000))
    # Preempted from elsewhere within a period: an OFF_SAME naming no copy.
    t.take(Event(OFF_SAME, PID, TID, 500, ip=0))
    t.take(Event(OFF_END, 0, TID, 500, off_ns=7, runnable=True))
    by_leaf, blocked = _off(t)
    assert by_leaf == {"f1": 30}
    assert blocked == 1030 and t.part(99).runnable_ns == 7  # every interval, on a stack or not
