"""What the detail screen says beside a row's figures (tui/screens/detail.py)."""

from __future__ import annotations

from adaptyst_top.snapshot import ProbeEntry, ProfileFunction, ProfilePart
from adaptyst_top.tui.screens.detail import never_called_line

LOOP = "_PyEval_EvalFrameDefault"
PYTHON = "/usr/bin/python3.11"


def _row(count: int, kind: str = "uprobe") -> ProbeEntry:
    return ProbeEntry(
        group=0, id=1, spec=f"uprobe:{PYTHON}:{LOOP}", name=LOOP, kind=kind,  # type: ignore[arg-type]
        state="attached", target=PYTHON, count=count,
    )  # fmt: skip


def _profile() -> ProfilePart:
    hot = ProfileFunction(LOOP, PYTHON, LOOP, self_samples=300, total=450)
    return ProfilePart(hz=99, samples=1000, functions=(hot,))


def test_a_loop_hot_in_the_profile_but_never_called_is_explained() -> None:
    """Issue 74's newcomer probed CPython's evaluation loop, 45% of the samples, and the
    row said 0 calls with no word why."""
    said = never_called_line(_row(0), _profile())
    assert "45% of the profile's samples" in said and "already running" in said
    assert "python:FILE:FUNC" in said


def test_nothing_is_said_where_there_is_nothing_to_explain() -> None:
    assert never_called_line(_row(3), _profile()) == ""  # it is called
    assert never_called_line(_row(0), None) == ""  # no profile
    assert never_called_line(_row(0, "usdt"), _profile()) == ""
    cold = ProfilePart(hz=99, samples=1000, functions=())
    assert never_called_line(_row(0), cold) == ""  # not hot: nothing to square
