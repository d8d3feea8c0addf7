"""bench/textual_floor.py's table app for tests/system/pty/test_direct_paint.py: a bordered table
with more rows than fit (so a scrollbar stands over its right edge), a header and a
status line, all changed every 0.2 s and painted straight to the terminal.

Keys: f freezes the figures; r has Textual repaint the whole screen; n shows a
notification over the table; d drops the first row and changes the next; b takes the
focus off the table (its border and cursor colours change) and t gives it back; g gives
the table another background; e writes a line straight to descriptor 2, as a C
library does. On exit it writes to the file it is given how many paints
went straight to the terminal, how many fell back to Textual's refresh, how many writes
reached the driver, and how many had when it was frozen after how many rounds."""

from __future__ import annotations

import os
import sys
from typing import ClassVar

from textual.binding import Binding, BindingType

from adaptyst_top.tui import direct_paint
from adaptyst_top.tui.widgets import fast_table, text_line
from adaptyst_top.tui.widgets.fast_table import FastTable
from adaptyst_top.tui.widgets.text_line import TextLine
from bench.textual_floor import Rows

COUNTS = {"direct": 0, "refresh": 0, "writes": 0, "frozen_after_writes": 0, "rounds": 0}


def counted(widget, lines) -> bool:  # type: ignore[no-untyped-def]
    done = direct_paint.paint_lines(widget, lines)
    COUNTS["direct" if done else "refresh"] += 1
    return done


fast_table.paint_lines = counted  # type: ignore[assignment]
text_line.paint_lines = counted  # type: ignore[assignment]


class PaintApp(Rows):
    CSS = (
        Rows.CSS
        + "#header { background: $panel; text-style: bold; } #status { color: $warning; }"
        + "FastTable.-other { background: $error 40%; }"
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "freeze", "Freeze"),
        Binding("r", "repaint", "Repaint"),
        Binding("n", "note", "Notify"),
        Binding("d", "drop_first", "Drop a row"),
        Binding("b", "blur", "Blur"),
        Binding("t", "focus_table", "Focus"),
        Binding("g", "other_background", "Background"),
        Binding("e", "noise", "Noise"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self) -> None:
        super().__init__(rows=60, period=0.2)
        self.frozen = False

    def on_mount(self) -> None:
        driver = self._driver
        assert driver is not None
        write = driver.write

        def counted_write(data: str) -> None:
            COUNTS["writes"] += 1
            write(data)

        driver.write = counted_write  # type: ignore[method-assign]
        super().on_mount()
        self.query_one(FastTable).focus()

    def tick(self) -> None:
        if not self.frozen:
            super().tick()  # every row, then "tick N" in the header and status

    def action_noise(self) -> None:
        os.write(2, b"NOISE-FROM-A-C-LIBRARY\n")
        # Painted after it, and kept (the ticks stop): the tests wait for this line.
        self.frozen = True
        self.query_one("#status", TextLine).text = "noise said"

    def action_freeze(self) -> None:
        self.frozen = True
        COUNTS["frozen_after_writes"], COUNTS["rounds"] = COUNTS["writes"], self.n
        self.query_one("#status", TextLine).text = f"frozen at tick {self.n} [not markup]"

    def action_repaint(self) -> None:
        self.screen.refresh()

    def action_drop_first(self) -> None:
        """A refresh of the whole table (a row gone) and a changed row in one handler."""
        table = self.query_one(FastTable)
        table.remove_row(table.order[0])
        key = table.order[0]
        table.upsert(key, {**table.rows[key].cells, "count": "dropped"})

    def action_blur(self) -> None:
        self.screen.set_focus(None)

    def action_focus_table(self) -> None:
        self.query_one(FastTable).focus()

    def action_other_background(self) -> None:
        self.query_one(FastTable).toggle_class("-other")

    def action_note(self) -> None:
        self.notify("a notification over the table", timeout=30)


if __name__ == "__main__":
    PaintApp().run()
    with open(sys.argv[1], "w") as out:  # Textual's own output goes to stderr
        print(" ".join(f"{k} {v}" for k, v in COUNTS.items()), file=out)
