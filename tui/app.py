"""The monitor: header, devices, probes, status line, footer."""

from __future__ import annotations

import os
import socket
from typing import ClassVar

from adaptyst_top.collectors.cpu import CpuCollector
from adaptyst_top.collectors.reading import DeviceReading
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header, Static


def fmt_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


class MonitorApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "adaptyst-top"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("p", "pause", "Pause"),
    ]

    def __init__(self, interval: float = 1.0, pid: int | None = None) -> None:
        super().__init__()
        self.interval = interval
        self.pid = pid if pid is not None else os.getpid()
        self.paused = False
        self.cpu = CpuCollector()

    def compose(self) -> ComposeResult:
        yield Header()
        devices: DataTable[str] = DataTable(id="devices", cursor_type="row")
        devices.border_title = "Devices"
        yield devices
        probes: DataTable[str] = DataTable(id="probes", cursor_type="row")
        probes.border_title = "Probes"
        yield probes
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"{socket.gethostname()}  pid {self.pid}  every {self.interval:g}s"
        devices = self.query_one("#devices", DataTable)
        for key, label in (
            ("name", "Device"),
            ("util", "Util"),
            ("mem", "Memory"),
            ("power", "Power"),
            ("energy", "Energy"),
        ):
            devices.add_column(label, key=key)
        probes = self.query_one("#probes", DataTable)
        for label in ("State", "Kind", "Name", "Calls", "Calls/s", "p50", "p99", "Overhead"):
            probes.add_column(label)
        self.query_one("#status", Static).update("no probes attached (use --probe SPEC)")
        self.refresh_devices()
        self.set_interval(self.interval, self.refresh_devices)

    def refresh_devices(self) -> None:
        if self.paused:
            return
        self.show_device(self.cpu.read())

    def show_device(self, r: DeviceReading) -> None:
        table = self.query_one("#devices", DataTable)
        util = "-" if r.util is None else f"{r.util * 100:5.1f}%"
        mem = f"{fmt_bytes(r.mem_used_bytes)} / {fmt_bytes(r.mem_total_bytes)}"
        power = "-" if r.power_w is None else f"{r.power_w:.1f} W"
        energy = r.note or "-" if r.energy_j is None else f"{r.energy_j:.1f} J ({r.energy_source})"
        cells = {"name": r.name, "util": util, "mem": mem, "power": power, "energy": energy}
        if r.id in table.rows:
            for col, value in cells.items():
                table.update_cell(r.id, col, value)
        else:
            table.add_row(*cells.values(), key=r.id)

    def action_pause(self) -> None:
        self.paused = not self.paused
        self.query_one("#status", Static).update("paused" if self.paused else "")
