"""A small app on the monitor's widgets for tests/test_direct_paint.py: a bordered table
with more rows than fit (so a scrollbar stands over its right edge) and a header and
status line, all changed every 0.2 s and painted straight to the terminal.

Keys: f freezes the figures; r has Textual repaint the whole screen; n shows a
notification over the table. On exit it writes to the file it is given how many paints went straight to the
terminal and how many fell back to Textual's refresh."""

from __future__ import annotations

import sys
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.driver import Driver

from adaptyst_top.tui import direct_paint
from adaptyst_top.tui.quiet_driver import quiet
from adaptyst_top.tui.rows import PROBE_COLUMNS
from adaptyst_top.tui.widgets import fast_table, text_line
from adaptyst_top.tui.widgets.fast_table import FastTable
from adaptyst_top.tui.widgets.text_line import TextLine

COUNTS = {"direct": 0, "refresh": 0}


def counted(widget, lines) -> bool:  # type: ignore[no-untyped-def]
    done = direct_paint.paint_lines(widget, lines)
    COUNTS["direct" if done else "refresh"] += 1
    return done


fast_table.paint_lines = counted  # type: ignore[assignment]
text_line.paint_lines = counted  # type: ignore[assignment]


class PaintApp(App[None]):
    CSS = """
    #header { background: $panel; text-style: bold; }
    FastTable { border: round $secondary; }
    #status { color: $warning; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "freeze", "Freeze"),
        Binding("r", "repaint", "Repaint"),
        Binding("n", "note", "Notify"),
        Binding("q", "quit", "Quit"),
    ]

    def get_driver_class(self) -> type[Driver]:
        return quiet(super().get_driver_class())

    def compose(self) -> ComposeResult:
        yield TextLine(id="header")
        yield FastTable(PROBE_COLUMNS)
        yield TextLine(id="status")

    def on_mount(self) -> None:
        self.n, self.frozen = 0, False
        self.query_one(FastTable).focus()
        self.tick()
        self.set_interval(0.2, self.tick)

    def tick(self) -> None:
        if self.frozen:
            return
        self.n += 1
        table = self.query_one(FastTable)
        for i in range(60):
            hits = self.n * (i + 1) if i % 3 == 0 else i  # a third of the rows change
            cells = {"state": "attached", "kind": "uprobe", "name": f"function_{i}"}
            cells |= {"count": f"{hits:,}", "mean": f"{1 + self.n % 7}.{i % 10} µs"}
            table.upsert(str(i), cells, style="warn" if i == 4 else "")
        self.query_one("#header", TextLine).text = f"tick {self.n}  │  60 rows  │  0.2s"
        self.query_one("#status", TextLine).text = f"status at tick {self.n} [not markup]"

    def action_freeze(self) -> None:
        self.frozen = True
        self.query_one("#status", TextLine).text = f"frozen at tick {self.n}"

    def action_repaint(self) -> None:
        self.screen.refresh()

    def action_note(self) -> None:
        self.notify("a notification over the table", timeout=30)


if __name__ == "__main__":
    PaintApp().run()
    with open(sys.argv[1], "w") as out:  # Textual's own output goes to stderr
        print(f"direct {COUNTS['direct']} refresh {COUNTS['refresh']}", file=out)
