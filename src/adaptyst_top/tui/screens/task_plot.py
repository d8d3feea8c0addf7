"""`enter` on a task: what the advisor learned of it. Time per run against input size
for each device (the measured means, the fitted a·n^b+c curves, the sizes where two
devices cross) and, where energy is known, time against energy with the Pareto front."""

from __future__ import annotations

import math
import os
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual_plotext import PlotextPlot

from adaptyst_top.snapshot import TaskEntry
from adaptyst_top.tui.advisor_rows import device_times, pct
from adaptyst_top.tui.format import fmt_energy, fmt_ns
from adaptyst_top.tui.task_plot_data import (
    band,
    crossovers,
    energy_points,
    fitted,
    fmt_size,
    linear_ticks,
    log_ticks,
    size_range,
)

ASCII_MARKERS = ("*", "+", "o", "x", "#", "@")
POINT_MARKERS = ("●", "■", "▲", "◆", "★", "✚")  # measured: apart from the fitted lines
# A device's colour, the same for its points, its line and its band (plotext's own
# cycle gave each call the next colour: a device's line and points did not match).
DEVICE_COLORS = ("cyan+", "magenta+", "green+", "orange+", "blue+", "red+")


class TaskScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,enter,q", "app.pop_screen", "Back"),
    ]

    def __init__(self, task: str, ascii: bool = False) -> None:
        super().__init__()
        self.task_name = task
        self.ascii = ascii
        self._shown: TaskEntry | None = None
        self._plain = False  # no colour (--ascii, NO_COLOR)

    def compose(self) -> ComposeResult:
        yield Static("", id="task-title", markup=False)  # a task name is any text
        yield PlotextPlot(id="time-plot")
        yield PlotextPlot(id="energy-plot")
        yield Footer()

    def on_mount(self) -> None:
        if self.ascii or os.environ.get("NO_COLOR"):
            self._plain = True
            for plot in self.query(PlotextPlot):
                plot.theme = "clear"  # no colour: the marks tell the devices apart

    def _color(self, devices: list[str], device: str) -> str | None:
        """DEVICE's colour among DEVICES (None without colour: the theme's)."""
        if self._plain:
            return None
        return DEVICE_COLORS[sorted(devices).index(device) % len(DEVICE_COLORS)]

    def _marker(self, i: int, point: bool = False) -> str:
        if self.ascii:
            return ASCII_MARKERS[i % len(ASCII_MARKERS)] if point else "."
        return POINT_MARKERS[i % len(POINT_MARKERS)] if point else "hd"

    def show(self, t: TaskEntry | None) -> None:
        if t is None:
            self.query_one("#task-title", Static).update(f"{self.task_name}: no longer seen")
            return
        if t == self._shown:
            return  # nothing new: a plot redrawn costs a frame
        self._shown = t
        crosses = crossovers(t.curves)
        said = "; ".join(
            f"{below} faster below {n:,.0f}, {above} above" for n, below, above in crosses
        )
        title = (
            f"{t.task}   on {t.device or '-'}   best {t.best or '-'}   "
            f"gain {'-' if t.best in ('', t.device) else pct(t.gain)}   "
            f"{t.state or '-'}   {t.executions:,} runs   input size {t.size or '-'}\n"
            f"time per run: {device_times(t, self.ascii) or '-'}"
            + (f"\ncrossovers: {said}" if said else "")
        )
        self.query_one("#task-title", Static).update(title)
        self._plot_times(t, crosses)
        self._plot_energy(t)

    def _plot_times(self, t: TaskEntry, crosses: list[tuple[float, str, str]]) -> None:
        """On log axes drawn from log10 values: plotext's own log scale rewrites its
        data in place, so a second draw (any resize) took log10 of a negative and
        crashed the monitor."""
        widget = self.query_one("#time-plot", PlotextPlot)
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        learnt = any(c.band for c in t.curves)
        plt.title(
            "time per run by input size: points measured, lines "
            + ("predicted (dots: one sigma)" if learnt else "fitted")
        )
        span = size_range(t.curves)
        times: list[float] = []
        devices = [c.device for c in t.curves]
        for i, c in enumerate(t.curves):
            color = self._color(devices, c.device)
            if span is not None:
                xs, ys = fitted(c, *span)
                if xs:  # drawn first: the measured points stay visible over it
                    said = "predicted" if c.band else "fit"
                    label = f"{c.device} {said}"
                    plt.plot(_log(xs), _log(ys), marker=self._marker(i), label=label, color=color)
                times += ys
            for sigmas in (-1, 1) if c.band else ():  # the learner's one sigma either way
                xs, ys = band(c, sigmas)
                if xs:
                    dot = "." if self.ascii else "·"
                    plt.plot(_log(xs), _log(ys), marker=dot, color=color)
                    times += ys
            points = [(n, s) for n, s in c.points if 0 < n < math.inf and 0 < s < math.inf]
            times += [s for _, s in points]
            plt.scatter(
                _log([n for n, _ in points]),
                _log([s for _, s in points]),
                marker=self._marker(i, point=True),
                label=c.device,
                color=color,
            )
        for n, _, _ in crosses:
            plt.vline(math.log10(n))
        # Ticks in the units every other screen uses (µs, ms; 32k), not raw seconds.
        if span is not None:
            xs = log_ticks(*span)
            plt.xticks(_log(xs), [fmt_size(n) for n in xs])
        if times:
            ys = log_ticks(min(times), max(times))
            plt.yticks(_log(ys), [fmt_ns(s * 1e9) for s in ys])
        plt.xlabel("input size (log)")
        widget.refresh()

    def _plot_energy(self, t: TaskEntry) -> None:
        widget = self.query_one("#energy-plot", PlotextPlot)
        points = energy_points(t)
        widget.display = bool(points)
        if not points:
            return
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("energy against time per run: the Pareto front joined")
        devices = [p[0] for p in points]
        for i, (device, time_s, energy, _) in enumerate(points):
            color = self._color(devices, device)
            marker = self._marker(i, point=True)
            plt.scatter([time_s], [energy], marker=marker, label=device, color=color)
        front = [(s, e) for _, s, e, on in points if on]
        if len(front) > 1:
            plt.plot([s for s, _ in front], [e for _, e in front], marker=self._marker(len(points)))
        plt.xlabel(f"time per run (fastest {fmt_ns(points[0][1] * 1e9)})")
        xs, ys = linear_ticks([p[1] for p in points]), linear_ticks([p[2] for p in points])
        plt.xticks(xs, [fmt_ns(s * 1e9) for s in xs])
        plt.yticks(ys, [fmt_energy(j) for j in ys])
        widget.refresh()


def _log(values: list[float]) -> list[float]:
    return [math.log10(v) for v in values]
