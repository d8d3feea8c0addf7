"""The framework's own floor, for bench_monitor_cpu.py: a Textual app that changes one
line once a second and does nothing else. What any Textual monitor refreshing every
second costs at least on this machine, measured in the same run as the monitor."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Static


class Floor(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("0", id="line")

    def on_mount(self) -> None:
        self.n = 0
        self.set_interval(1.0, self.tick)

    def tick(self) -> None:
        self.n += 1
        self.query_one("#line", Static).update(str(self.n))


if __name__ == "__main__":
    Floor().run()
