"""`e`: each device's power over the session and the energy it used, from the snapshots
the monitor already had (nvitop's, nvtop's and btop's users ask for this history)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual_plotext import PlotextPlot

from adaptyst_top.tui.format import fmt_energy
from adaptyst_top.tui.power_history import PowerHistory
from adaptyst_top.tui.task_plot_data import linear_ticks

Series = Callable[[str], tuple[list[float], list[float]]]
MARKERS = ("hd", "fhd", "braille", "dot", "sd")
ASCII_MARKERS = ("*", "+", "o", "x", "#")


def fmt_clock(t: float) -> str:
    """Session time on an axis: 0:45, 12:05, 1:02:03."""
    s = round(t)
    if s >= 3600:
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


class PowerScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,e,q", "app.pop_screen", "Back"),
    ]

    def __init__(self, ascii: bool = False) -> None:
        super().__init__()
        self.ascii = ascii

    def compose(self) -> ComposeResult:
        yield Static("", id="power-title", markup=False)  # device names are any text
        yield PlotextPlot(id="power-plot")
        yield PlotextPlot(id="energy-plot")
        yield Footer()

    def on_mount(self) -> None:
        if self.ascii or os.environ.get("NO_COLOR"):
            for plot in self.query(PlotextPlot):
                plot.theme = "clear"

    def _marker(self, i: int) -> str:
        return (ASCII_MARKERS if self.ascii else MARKERS)[i % len(MARKERS)]

    def show(self, history: PowerHistory) -> None:
        lines = []
        for device in history.devices:
            _, watts = history.power(device)
            _, joules = history.energy(device)
            now = f"{watts[-1]:.1f} W now, " if watts else ""
            used = f"{fmt_energy(joules[-1])} used" if joules else "no energy counter"
            source = history.sources.get(device) or "-"
            lines.append(f"{history.names[device]}: {now}{used} ({source})")
        if not lines:
            lines = ["no device reports power or energy here (see `adaptyst-top doctor`)"]
        span = [r.t for kept in history.devices.values() for r in kept]
        if span:
            lines.insert(0, f"power and energy, {fmt_clock(min(span))} to {fmt_clock(max(span))}")
        self.query_one("#power-title", Static).update("\n".join(lines))
        self._plot(history, "power-plot", "power (W) over the session", history.power, "W")
        self._plot(
            history, "energy-plot", "energy used since the first reading", history.energy, "J"
        )

    def _plot(
        self, history: PowerHistory, plot_id: str, title: str, series: Series, unit: str
    ) -> None:
        widget = self.query_one(f"#{plot_id}", PlotextPlot)
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(title)
        ts: list[float] = []
        vs: list[float] = []
        for i, device in enumerate(history.devices):
            xs, ys = series(device)
            if xs:
                plt.plot(xs, ys, marker=self._marker(i), label=history.names[device])
                ts += xs
                vs += ys
        if ts:
            xt = linear_ticks(ts)
            plt.xticks(xt, [fmt_clock(t) for t in xt])
            yt = linear_ticks([0.0, *vs])
            plt.yticks(yt, [f"{v:.0f} W" if unit == "W" else fmt_energy(v) for v in yt])
        plt.xlabel("session time")
        widget.refresh()
