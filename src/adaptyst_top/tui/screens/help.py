"""`?`: every key, in one place."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = (
    ("space", "switch the selected probe on/off (a map write; no recompilation)"),
    ("a", "add probes: pick from the target's functions and USDT probes, or type a spec"),
    ("d", "remove the selected probe's spec"),
    ("enter", "probe detail: latency histogram, percentiles, rate and p99 over time"),
    ("/", "filter probe rows (substring; empty to clear)"),
    ("s / S", "sort by the next column / reverse the order"),
    ("p", "pause / resume the display"),
    ("+ / -", "refresh slower / faster"),
    ("m", "apply the selected advice"),
    ("M", "advisor: switch between suggest and auto"),
    ("tab", "move between panes"),
    ("< / >", "replay: slower / faster"),
    (".", "replay: one snapshot (while paused)"),
    ("ctrl+p", "command palette"),
    ("?", "this help"),
    ("q", "quit (probes detach; nothing is left in the kernel)"),
)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "Close"),
    ]

    def compose(self) -> ComposeResult:
        width = max(len(k) for k, _ in KEYS)
        lines = ["adaptyst-top keys", ""] + [f"  {k:<{width}}  {what}" for k, what in KEYS]
        lines += [
            "",
            "Latencies are net of the probes' own cost; Cost/hit is that cost.",
            "Press escape to close.",
        ]
        with VerticalScroll(id="help"):
            yield Static("\n".join(lines))

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
