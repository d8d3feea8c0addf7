"""`?`: every key, every column and every notation, in one place."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from adaptyst_top.tui.advisor_rows import MOVE_COLUMNS, TASK_COLUMNS
from adaptyst_top.tui.columns import Column
from adaptyst_top.tui.keys import KEYS
from adaptyst_top.tui.rows import DEVICE_COLUMNS, PROBE_COLUMNS

TABLES: tuple[tuple[str, tuple[Column, ...]], ...] = (
    ("Probes", PROBE_COLUMNS),
    ("Devices", DEVICE_COLUMNS),
    ("Advisor tasks", TASK_COLUMNS),
    ("Advisor moves", MOVE_COLUMNS),
)
NOTATION = (
    ("<1 µs", "a latency below what subtracting the probe's own cost leaves certain"),
    ("~", "a predicted figure (fitted over sizes, or another device's ratio), not measured"),
    ("n~2^15 f5", "a task's input: 2^15 to 2^16 elements, feature bucket 5 (set by the app)"),
    ("…", "text cut to fit; a wider terminal shows it whole"),
    ("▲ / ▼", "the column rows are sorted by, ascending / descending"),
    ("-", "nothing measured (yet), or not applicable"),
)


def help_lines() -> list[str]:
    """The help's text: keys, then each table's columns, then the notation."""
    width = max(len(k.shown) for k in KEYS)
    lines = ["adaptyst-top keys", ""] + [f"  {k.shown:<{width}}  {k.help}" for k in KEYS]
    for title, columns in TABLES:
        width = max(len(c.label) for c in columns)
        lines += ["", f"{title} columns", ""]
        lines += [f"  {c.label:<{width}}  {c.help}" for c in columns]
    width = max(len(k) for k, _ in NOTATION)
    lines += ["", "Notation", ""] + [f"  {k:<{width}}  {what}" for k, what in NOTATION]
    lines += ["", "Latencies are net of the probes' own cost; Cost/hit is that cost."]
    return lines


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "Close"),
    ]

    def compose(self) -> ComposeResult:
        lines = [*help_lines(), "Press escape to close; arrows or page keys scroll."]
        with VerticalScroll(id="help"):
            yield Static("\n".join(lines), markup=False)

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
