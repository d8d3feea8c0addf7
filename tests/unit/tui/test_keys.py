"""The main screen's keys, declared once (tui/keys.py): every binding runs an action the
app has, and the help lists every key with what it does."""

from __future__ import annotations

from adaptyst_top.tui.app import MonitorApp
from adaptyst_top.tui.keys import BINDINGS, KEYS
from adaptyst_top.tui.screens.help import help_lines


def test_every_binding_runs_an_action_the_app_has() -> None:
    assert list(MonitorApp.BINDINGS) == list(BINDINGS)
    for b in BINDINGS:
        name = b.action.split("(", 1)[0]
        assert callable(getattr(MonitorApp, f"action_{name}", None)), b.action


def test_the_help_says_every_key() -> None:
    lines = help_lines()
    for k in KEYS:
        assert any(
            line.split() and line.strip().startswith(k.shown) and k.help in line for line in lines
        ), k.shown
    # Every bound key is in a help line's keys (Textual's names: "question_mark" is "?").
    shown = " ".join(k.shown for k in KEYS)
    names = {"question_mark": "?", "slash": "/", "plus": "+", "minus": "-",
             "less_than_sign": "<", "greater_than_sign": ">", "full_stop": ".",
             "equals_sign": "+"}  # fmt: skip
    for b in BINDINGS:
        for key in b.key.split(","):
            assert names.get(key, key) in shown.split(), b.key
