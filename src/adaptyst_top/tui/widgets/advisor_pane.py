"""The advisor pane: its state in a line, a row per task (pending advice in it, `m`
applies the selected one, `enter` plots it) and the log of the moves made."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical

from adaptyst_top.snapshot import Snapshot
from adaptyst_top.tui.advisor_rows import (
    MOVE_COLUMNS,
    TASK_COLUMNS,
    move_key,
    move_row,
    state_line,
    task_row,
)
from adaptyst_top.tui.widgets.fast_table import FastTable
from adaptyst_top.tui.widgets.text_line import TextLine


class AdvisorPane(Vertical):
    def __init__(self, ascii: bool = False) -> None:
        super().__init__(id="advisor")
        self.border_title = "Advisor"
        self.ascii = ascii
        self.mode = "suggest"  # what the user asked with M (a replay shows what was recorded)
        self._text = ""
        self._snap: Snapshot | None = None

    def compose(self) -> ComposeResult:
        yield TextLine(id="advisor-state")
        yield FastTable(TASK_COLUMNS, id="tasks")
        yield FastTable(MOVE_COLUMNS, id="moves")

    def on_mount(self) -> None:
        self.moves.set_sort("order", reverse=True)  # the newest move first, kept in view
        self.moves.follow_head = True
        self.moves.border_title = "Moves"
        self.show_state()

    @property
    def tasks(self) -> FastTable:
        return self.query_one("#tasks", FastTable)

    @property
    def moves(self) -> FastTable:
        return self.query_one("#moves", FastTable)

    def show(self, snap: Snapshot) -> None:
        self._snap = snap
        advice = {a.task: a for a in snap.advice}
        tasks = self.tasks
        for t in snap.tasks:
            cells, style = task_row(t, advice.get(t.task), self.ascii)
            tasks.upsert(t.task, cells, style=style)
        tasks.retain({t.task for t in snap.tasks})
        moves = snap.advisor.moves if snap.advisor else ()
        table = self.moves
        for i, m in enumerate(moves):
            cells, style = move_row(m, self.ascii)
            table.upsert(move_key(m), cells, sort={"order": i}, style=style)
        table.retain({move_key(m) for m in moves})
        for pane, shown in ((tasks, bool(snap.tasks)), (table, bool(moves))):
            if pane.display != shown:
                pane.display = shown
        self.show_state()

    def selected_task(self) -> str | None:
        tasks = self.tasks
        return tasks.selected_key if tasks.rows else None

    def show_state(self) -> None:
        state = self._snap.advisor if self._snap else None
        text = state_line(state, self._snap.tasks if self._snap else (), self.mode)
        if text != self._text:  # an update re-lays out the pane
            self._text = text
            self.query_one("#advisor-state", TextLine).text = text
