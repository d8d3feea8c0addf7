"""A line of text that repaints without a layout pass.

Static.update() asks for a new layout of the whole screen every time, which is most
of a 1 s refresh's cost when the header changes every second; a fixed-height
widget whose text is a repaint-only reactive does not."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widget import Widget


class TextLine(Widget):
    DEFAULT_CSS = "TextLine { height: 1; }"

    text: reactive[str] = reactive("", layout=False)

    def render(self) -> str:
        return self.text
