"""The process list (`l`, and where the monitor starts with no target): every process
(root) or your own, by CPU as htop sorts them; `enter` profiles the selected one."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Static

from adaptyst_top.collectors.processes import ProcessRow, ProcessTable
from adaptyst_top.tui.format import fmt_bytes

REFRESH_S = 1.0


class ProcessScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q,escape,l", "app.pop_screen", "Back"),
        Binding("enter", "pick", "Profile it"),
        Binding("up", "move(-1)", show=False),
        Binding("down", "move(1)", show=False),
        Binding("pageup", "move(-10)", show=False),
        Binding("pagedown", "move(10)", show=False),
    ]

    def __init__(self, table: ProcessTable, pick: Callable[[int], None], title: str) -> None:
        super().__init__()
        self.table = table
        self.pick = pick
        self.title_text = title
        self.rows: list[ProcessRow] = []
        self.row = 0
        self.pid: int | None = None  # the selected process: it stays selected as rows move

    def compose(self) -> ComposeResult:
        with Vertical(id="processes"):
            yield Static(self.title_text, id="processes-head", markup=False)
            yield Static("reading the processes…", id="processes-list", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.read()
        self.set_interval(REFRESH_S, self.read)

    @work(thread=True, exclusive=True, group="processes")
    def read(self) -> None:
        rows = self.table.rows()  # /proc for every process: off the UI thread
        self.app.call_from_thread(self.show, rows)

    def show(self, rows: list[ProcessRow]) -> None:
        self.rows = rows
        if self.pid is not None:
            self.row = next((i for i, r in enumerate(rows) if r.pid == self.pid), self.row)
        self.redraw()

    def redraw(self) -> None:
        width = max(40, self.size.width)
        height = max(3, self.size.height - 3)
        self.row = min(self.row, max(0, len(self.rows) - 1))
        if self.rows:
            self.pid = self.rows[self.row].pid
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append(f"{'PID':>7} {'USER':<9} {'CPU%':>5} {'RSS':>7} {'THR':>4}  COMMAND\n", "bold")
        start = max(0, self.row - height + 2)
        for i, r in enumerate(self.rows[start : start + height - 1], start):
            line = (
                f"{r.pid:>7} {r.user[:9]:<9} {r.cpu:>5.1f} {fmt_bytes(r.rss):>7} "
                f"{r.threads:>4}  {r.command}"
            )
            out.append(line[:width] + "\n", style="reverse" if i == self.row else "")
        self.query_one("#processes-list", Static).update(out)

    def action_move(self, by: int) -> None:
        self.row = max(0, min(len(self.rows) - 1, self.row + by))
        self.pid = self.rows[self.row].pid if self.rows else None
        self.redraw()

    def action_pick(self) -> None:
        if self.rows:
            self.pick(self.rows[self.row].pid)
