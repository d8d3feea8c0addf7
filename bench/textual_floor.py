"""Floors for bench_monitor_cpu.py, measured in the same run as the monitor.

    python -m bench.textual_floor            Textual as it comes: a Static changed
                                             once a second
    python -m bench.textual_floor --rows N   our presentation alone: the monitor's
                                             driver and table widget, N probe rows in a
                                             bordered pane, every row's figures changed
                                             once a second, no data collected

The first is what any Textual monitor refreshing every second costs at least here; the
second what showing N changing rows costs with no snapshot behind it, so that the
monitor's figure minus it is the price of collecting the data.
"""

from __future__ import annotations

import argparse

from textual.app import App, ComposeResult
from textual.driver import Driver
from textual.widgets import Static

from adaptyst_top.tui.direct_paint import one_write
from adaptyst_top.tui.quiet_driver import quiet
from adaptyst_top.tui.rows import PROBE_COLUMNS
from adaptyst_top.tui.widgets.fast_table import FastTable
from adaptyst_top.tui.widgets.text_line import TextLine


class Floor(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("0", id="line")

    def on_mount(self) -> None:
        self.n = 0
        self.set_interval(1.0, self.tick)

    def tick(self) -> None:
        self.n += 1
        self.query_one("#line", Static).update(str(self.n))


class Rows(App[None]):
    CSS = "FastTable { border: round $secondary; }"

    def __init__(self, rows: int, period: float = 1.0) -> None:
        super().__init__()
        self.rows, self.n, self.period = rows, 0, period

    def get_driver_class(self) -> type[Driver]:
        return quiet(super().get_driver_class())

    def compose(self) -> ComposeResult:
        yield TextLine(id="header")
        yield FastTable(PROBE_COLUMNS)
        yield TextLine(id="status")

    def on_mount(self) -> None:
        self.tick()
        self.set_interval(self.period, self.tick)

    def tick(self) -> None:
        with one_write(self):  # as the monitor's refresh: its paints in one write
            self._change_all()

    def _change_all(self) -> None:
        self.n += 1
        table = self.query_one(FastTable)
        for i in range(self.rows):
            calls = self.n * (i + 1) * 997
            cells = {
                "state": "attached",
                "kind": "uprobe",
                "target": "workload",
                "name": f"function_{i}",
                "count": str(calls),
                "rate": f"{(i + 1) * 997 + self.n % 7}",
                "mean": f"{1.5 + (self.n % 10) / 10:.2f} µs",
                "p50": f"{1.2 + (self.n % 9) / 10:.2f} µs",
                "p99": f"{3.1 + (self.n % 8) / 10:.2f} µs",
                "cost": "0.9 µs",
            }
            table.upsert(str(i), cells)
        for line in ("#header", "#status"):
            self.query_one(line, TextLine).text = f"tick {self.n}"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=0)
    n = ap.parse_args().rows
    (Rows(n) if n else Floor()).run()
