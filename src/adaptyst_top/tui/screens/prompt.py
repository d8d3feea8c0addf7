"""A one-line input at the bottom (filter), returning its text or None on escape."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Input


class PromptScreen(ModalScreen[str | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, prompt: str, value: str = "") -> None:
        super().__init__()
        self.prompt, self.value = prompt, value

    def compose(self) -> ComposeResult:
        yield Input(value=self.value, placeholder=self.prompt, id="prompt")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class Filterable(Protocol):
    filter_text: str

    def set_filter(self, text: str) -> None: ...


def ask_filter(app: App[Any], table: Filterable, what: str, say: Callable[[str], None]) -> None:
    """`/`: ask for a table's filter text; empty clears it; escape leaves it as it was.
    It opens empty (what was typed replaces the filter, as in less and htop), the
    current filter shown in its place."""

    def done(text: str | None) -> None:
        if text is not None:
            table.set_filter(text.strip())
            say(f"filter: {text.strip()}" if text.strip() else "filter cleared")

    now = f"now {table.filter_text!r}; " if table.filter_text else ""
    app.push_screen(PromptScreen(f"filter {what} ({now}empty clears)"), done)
