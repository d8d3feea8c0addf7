"""Turns at the compiler: owners are served in rotation, so one owner's flood of
compilations keeps another waiting for at most one of them."""

from __future__ import annotations

import threading
import time

from adaptyst_top.collectors.probes.compile_turns import CompileTurns


def test_an_owner_waits_for_one_compilation_of_a_flooding_owner_not_all() -> None:
    turns = CompileTurns()
    order: list[str] = []
    holding = threading.Event()
    release = threading.Event()

    def compile_as(owner: str, first: bool = False) -> None:
        with turns.turn(owner):
            order.append(owner)
            if first:
                holding.set()
                release.wait(10)

    first = threading.Thread(target=compile_as, args=("flood", True))
    first.start()
    assert holding.wait(10)
    threads = []
    for name in ["flood"] * 5 + ["other"]:  # the other comes last, behind five
        t = threading.Thread(target=compile_as, args=(name,))
        t.start()
        threads.append(t)
        deadline = time.monotonic() + 10
        while sum(len(q) for q in turns._waiting.values()) < len(threads):
            assert time.monotonic() < deadline
            time.sleep(0.001)
    release.set()
    for t in [first, *threads]:
        t.join(10)
    assert order[:3] == ["flood", "flood", "other"]
    assert order.count("flood") == 6


def test_one_owner_is_served_first_come_first() -> None:
    turns = CompileTurns()
    seen: list[int] = []
    with turns.turn("a"):
        threads = [threading.Thread(target=lambda i=i: _note(turns, seen, i)) for i in range(4)]
        for t in threads:
            t.start()
            while (
                not any(turns._waiting.values())
                or sum(map(len, turns._waiting.values())) < threads.index(t) + 1
            ):
                time.sleep(0.001)
    for t in threads:
        t.join(10)
    assert seen == [0, 1, 2, 3]


def _note(turns: CompileTurns, seen: list[int], i: int) -> None:
    with turns.turn("a"):
        seen.append(i)


def test_a_teardown_waits_for_a_compilation_under_way() -> None:
    """bcc's module destructor edits the table storage compilations fill: a cleanup
    beside a compile crashed the agent (two threads faulting in libbcc's front end)."""
    import threading
    import time

    from adaptyst_top.collectors.probes.compile_turns import CompileTurns

    turns = CompileTurns()
    order: list[str] = []
    started = threading.Event()

    def compile_() -> None:
        with turns.turn("alice"):
            started.set()
            time.sleep(0.2)
            order.append("compiled")

    t = threading.Thread(target=compile_)
    t.start()
    started.wait(5)
    with turns.teardown():
        order.append("cleaned")
    t.join()
    assert order == ["compiled", "cleaned"]
