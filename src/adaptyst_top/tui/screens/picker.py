"""`a`: add probes. Type to filter the functions of the target and of the libraries it
maps (by the name the source spells or the raw symbol), and their USDT probes, or type
a whole spec; enter adds it. A function whose probe would be refused is listed, marked
with why, and cannot be picked."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from adaptyst_top.runtime.listing import Candidate

SHOWN = 300  # options listed at once: enough to pick from, cheap to filter


class AddProbeScreen(ModalScreen[str | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("down", "focus_list", "List", show=False),
    ]

    def __init__(self, load_candidates: Callable[[], list[Candidate]]) -> None:
        super().__init__()
        self.load = load_candidates
        self.candidates: list[Candidate] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static(
                "Add a probe: type to filter, or a whole spec (uprobe:TARGET:FUNC, "
                "usdt:TARGET:PROVIDER:NAME[..END][@argN]); enter adds it",
                id="picker-help",
            )
            yield Input(placeholder="filter or spec", id="picker-input")
            yield OptionList(id="picker-list")

    def on_mount(self) -> None:
        self.query_one("#picker-list", OptionList).add_option(
            Option("reading the target's symbols…", disabled=True)
        )
        self.fill()

    @work(thread=True)
    def fill(self) -> None:
        self.app.call_from_thread(self._loaded, self.load())

    def _loaded(self, found: list[Candidate]) -> None:
        self.candidates = found
        self._show(self.query_one("#picker-input", Input).value)

    def _show(self, text: str) -> None:
        ol = self.query_one("#picker-list", OptionList)
        ol.clear_options()
        words = text.lower().split()
        shown = [
            c
            for c in self.candidates
            if all(w in c.label.lower() or w in c.spec.lower() for w in words)
        ][:SHOWN]
        ol.add_options([_option(c) for c in shown])
        if not self.candidates:
            ol.add_option(Option("no symbols found (type a whole spec)", disabled=True))

    def on_input_changed(self, event: Input.Changed) -> None:
        self._show(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        ol = self.query_one("#picker-list", OptionList)
        if text.startswith(("uprobe:", "usdt:", "u:")) and text.count(":") >= 2:
            self.dismiss(text)
        else:
            options = (ol.get_option_at_index(i) for i in range(ol.option_count))
            first = next((o for o in options if o.id and not o.disabled), None)
            if first is not None:
                self.dismiss(str(first.id))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id:
            self.dismiss(str(event.option.id))

    def action_focus_list(self) -> None:
        self.query_one("#picker-list", OptionList).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)


def _option(c: Candidate) -> Option:
    if c.refused is None:
        return Option(c.label, id=c.spec)
    # Disabled: picked, it would only come back as an error row.
    return Option(f"✗ {c.label}  — {c.refused}", id=c.spec, disabled=True)
