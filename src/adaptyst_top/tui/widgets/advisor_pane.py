"""The advisor pane: its state in a line, and the advice it gives (a row per task)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical

from adaptyst_top.snapshot import Snapshot
from adaptyst_top.tui.rows import ADVICE_COLUMNS, advice_row, task_summary
from adaptyst_top.tui.widgets.fast_table import FastTable
from adaptyst_top.tui.widgets.text_line import TextLine


class AdvisorPane(Vertical):
    def __init__(self) -> None:
        super().__init__(id="advisor")
        self.border_title = "Advisor"
        self.mode = "suggest"  # what the user asked with M (a replay shows what was recorded)
        self._text = ""
        self._snap: Snapshot | None = None

    def compose(self) -> ComposeResult:
        yield TextLine(id="advisor-state")
        yield FastTable(ADVICE_COLUMNS, id="advice")

    def on_mount(self) -> None:
        self.show_state()

    def show(self, snap: Snapshot) -> None:
        self._snap = snap
        table = self.query_one("#advice", FastTable)
        for a in snap.advice:
            table.upsert(a.task, advice_row(a))
        table.retain({a.task for a in snap.advice})
        if table.display != bool(snap.advice):
            table.display = bool(snap.advice)
        self.show_state()

    def selected_task(self) -> str | None:
        table = self.query_one("#advice", FastTable)
        return table.selected_key if table.rows else None

    def show_state(self) -> None:
        state = self._snap.advisor if self._snap else None
        if state is not None and self._snap is not None:
            # Tasks whose device beats the others most come first: a move and what it
            # gained, measured, is what this line is for.
            said = sorted((task_summary(t) for t in self._snap.tasks), key=lambda x: -x[0])
            where = "; ".join(text for _, text in said)
            text = (
                f"advisor {state.state or '?'} ({state.mode or self.mode}, "
                f"{state.objective or '?'}): {where or 'no task seen yet'}; {state.detail}"
            )
        else:
            text = (
                f"advisor ({self.mode}): not running — start with --advisor and task "
                "probes (adaptyst:task_begin..task_end), or `adaptyst-top demo`"
            )
        if text != self._text:  # an update re-lays out the pane
            self._text = text
            self.query_one("#advisor-state", TextLine).text = text
