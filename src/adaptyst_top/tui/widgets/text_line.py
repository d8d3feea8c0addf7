"""A line of plain text that repaints without a layout pass.

Static.update() asks for a new layout of the whole screen every time, which is most
of a 1 s refresh's cost when the header changes every second; a fixed-height
widget whose text is a repaint-only reactive does not. A new text is written straight
to the terminal when it can be (tui/direct_paint.py), so the compositor is not woken.
The text is never read as markup: a probe spec or an error may hold brackets."""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from adaptyst_top.tui.glyphs import to_ascii
from adaptyst_top.tui.textual_private import paint_lines


class TextLine(Widget):
    DEFAULT_CSS = "TextLine { height: 1; }"

    text: reactive[str] = reactive("", layout=False, repaint=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, markup=False)
        self._ascii = False

    def on_mount(self) -> None:
        self._ascii = bool(getattr(self.app, "ascii", False))  # --ascii: every cell ASCII

    def _shown(self) -> str:
        return to_ascii(self.text) if self._ascii else self.text

    def render(self) -> str:
        if self.size.height == 1 and self.size.width:  # cut as render_line cuts it
            text = _whole_words(self.text, self.size.width)
            return to_ascii(text) if self._ascii else text
        return self._shown()

    def render_line(self, y: int) -> Strip:
        if self.size.height != 1:
            return super().render_line(y)  # wrapped over its lines by Textual
        # One line needs no wrapping: a segment, 15x cheaper. It ends where Textual's
        # wrap would end it (at the last whole word), and the style cache pads it.
        text = _whole_words(self.text, self.size.width)
        text = to_ascii(text) if self._ascii else text
        return Strip([Segment(text, self.visual_style.rich_style)])

    def watch_text(self) -> None:
        if not paint_lines(self, range(self.size.height)):
            self.refresh()


def _whole_words(text: str, width: int) -> str:
    """TEXT cut to WIDTH cells after its last whole word (a single word longer than the
    line is cut where it must be), ending in "…": never a number cut in two, never a
    sentence that stops as if it were whole."""
    if cell_len(text) <= width:
        return text
    if width < 2:
        return set_cell_size(text, width)
    # One cell kept for the mark that says the line goes on (to_ascii makes it "~").
    head = set_cell_size(text, width - 1)
    if text[len(head)] != " ":
        cut = head.rstrip().rfind(" ")
        head = head[:cut] if cut > 0 else head
    return head.rstrip() + "…"
