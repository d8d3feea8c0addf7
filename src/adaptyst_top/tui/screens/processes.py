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
from adaptyst_top.tui.format import fmt_bytes_short

REFRESH_S = 1.0


HEADER = f"{'PID':>7} {'USER':<9} {'CPU%':>5} {'RSS':>6} {'THR':>4}  COMMAND"


def process_line(r: ProcessRow) -> str:
    """R under HEADER: every column its width, whatever the figure."""
    cpu = f"{r.cpu:>5.1f}" if r.cpu < 999.95 else f"{min(r.cpu, 99999.0):>5.0f}"
    return (
        f"{r.pid:>7} {r.user[:9]:<9} {cpu} {fmt_bytes_short(r.rss):>6} "
        f"{min(r.threads, 9999):>4}  {r.command}"
    )


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
        out.append(HEADER + "\n", "bold")
        start = max(0, self.row - height + 2)
        for i, r in enumerate(self.rows[start : start + height - 1], start):
            out.append(process_line(r)[:width] + "\n", style="reverse" if i == self.row else "")
        self.query_one("#processes-list", Static).update(out)

    def action_move(self, by: int) -> None:
        self.row = max(0, min(len(self.rows) - 1, self.row + by))
        self.pid = self.rows[self.row].pid if self.rows else None
        self.redraw()

    def action_pick(self) -> None:
        if self.rows:
            self.pick(self.rows[self.row].pid)
