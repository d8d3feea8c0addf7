"""`a`: add probes. Type to filter the functions of the target and of the libraries it
maps (by the name the source spells or the raw symbol), and their USDT probes, or type
a whole spec; enter adds it. A function whose probe would be refused is listed, marked
with why, and cannot be picked."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from adaptyst_top.collectors.probes.kinds import SPEC_PREFIXES, SYNTAX
from adaptyst_top.runtime.listing import Candidate

SHOWN = 300  # options listed at once: enough to pick from, cheap to filter
BATCH_S = 0.25  # candidates read reach the list this often while the rest are read


class AddProbeScreen(ModalScreen[str | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("down", "focus_list", "List", show=False),
    ]

    def __init__(self, load_candidates: Callable[[], Iterable[Candidate]]) -> None:
        super().__init__()
        self.load = load_candidates
        self.candidates: list[Candidate] = []
        self.loaded = False
        self._specs: set[str] = set()  # an option's id is its spec: each spec once
        self._text = ""
        self._matches: list[Candidate] = []  # of self.candidates, for self._text
        self._lock = threading.Lock()
        self._incoming: list[Candidate] = []  # read, not yet taken (fill's thread)
        self._read_all = False

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static(
                f"Add a probe: type to filter, or a whole spec ({SYNTAX}; N from 1); enter adds it",
                id="picker-help",
                markup=False,
            )
            yield Input(placeholder="filter or spec", id="picker-input")
            yield OptionList(id="picker-list")

    def on_mount(self) -> None:
        self._render_list()
        self._poll = self.set_interval(BATCH_S, self._take)
        self.fill()

    @work(thread=True)
    def fill(self) -> None:
        # Read into a list the screen takes from on a timer: a read that blocks (a large
        # library's tables) never holds back what was read before it.
        worker = get_current_worker()
        for c in self.load():
            if worker.is_cancelled:
                return  # the picker was closed: the rest is not read
            with self._lock:
                self._incoming.append(c)
        with self._lock:
            self._read_all = True
        self.app.call_from_thread(self._take)

    def _take(self) -> None:
        with self._lock:
            found, self._incoming = self._incoming, []
            done = self._read_all
        if done:
            self._poll.stop()
        if found or done:
            self._more(found, done)

    def _more(self, found: list[Candidate], done: bool) -> None:
        fresh = [c for c in found if c.spec not in self._specs]
        self._specs.update(c.spec for c in fresh)
        self.candidates += fresh
        self.loaded = done
        before = len(self._matches)
        if before < SHOWN:
            self._matches += [c for c in fresh if self._fits(c)][: SHOWN - before]
        if before < SHOWN or done:  # a full list changes no more until the text does
            self._render_list()

    def _fits(self, c: Candidate) -> bool:
        words = self._text.lower().split()
        return all(w in c.label.lower() or w in c.spec.lower() for w in words)

    def _show(self, text: str) -> None:
        self._text = text
        self._matches = []
        for c in self.candidates:
            if self._fits(c):
                self._matches.append(c)
                if len(self._matches) >= SHOWN:
                    break
        self._render_list()

    def _render_list(self) -> None:
        ol = self.query_one("#picker-list", OptionList)
        ol.clear_options()
        ol.add_options([_option(c) for c in self._matches])
        if not self.loaded:
            # Never "none" while reading: what is not listed yet may still come.
            ol.add_option(
                Option(
                    f"reading the target's symbols… {len(self.candidates):,} so far", disabled=True
                )
            )
        elif not self.candidates:
            ol.add_option(Option("no symbols found (type a whole spec)", disabled=True))
        elif not self._matches:
            ol.add_option(
                Option(f"none of {len(self.candidates):,} symbols matches", disabled=True)
            )

    def on_input_changed(self, event: Input.Changed) -> None:
        self._show(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        ol = self.query_one("#picker-list", OptionList)
        if text.startswith(SPEC_PREFIXES) and text.count(":") >= 2:
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
        return Option(Text(c.label), id=c.spec)  # a symbol is any bytes: never markup
    # Disabled: picked, it would only come back as an error row.
    return Option(Text(f"✗ {c.label}  — {c.refused}"), id=c.spec, disabled=True)
