"""The monitor: header, devices, probes, status line, footer.

Sources are read on a thread worker (the hub touches kernel maps and /proc); the UI
thread only updates the cells that changed.
"""

from __future__ import annotations

import socket
from typing import Any, ClassVar

from adaptyst_top.tui.format import fmt_bytes, fmt_count, fmt_ns, fmt_rate
from adaptyst_top.tui.session import Session
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header, Static

PROBE_COLUMNS = (
    ("state", "State"),
    ("kind", "Kind"),
    ("name", "Name"),
    ("key", "Key"),
    ("count", "Calls"),
    ("rate", "Calls/s"),
    ("mean", "Mean"),
    ("p50", "p50"),
    ("p99", "p99"),
    ("max", "Max"),
    ("cost", "Cost/hit"),
)
DEVICE_COLUMNS = (
    ("name", "Device"),
    ("util", "Util"),
    ("mem", "Memory"),
    ("power", "Power"),
    ("energy", "Energy"),
)


def probe_cells(p: dict[str, Any]) -> dict[str, str]:
    return {
        "state": str(p.get("state", "")),
        "kind": str(p.get("kind") or ""),
        "name": str(p.get("name", "")),
        "key": "" if p.get("key") is None else str(p["key"]),
        "count": fmt_count(p.get("count")),
        "rate": fmt_rate(p.get("rate_hz")),
        "mean": fmt_ns(p.get("mean_ns")),
        "p50": fmt_ns(p.get("p50_ns")),
        "p99": fmt_ns(p.get("p99_ns")),
        "max": fmt_ns(p.get("max_ns")),
        "cost": fmt_ns(p.get("overhead_ns_per_hit")) if p.get("error") is None else p["error"],
    }


def device_cells(d: dict[str, Any]) -> dict[str, str]:
    util = "-" if d.get("util") is None else f"{d['util'] * 100:5.1f}%"
    energy = (
        f"{d['energy_j']:.1f} J ({d['energy_source']})"
        if d.get("energy_j") is not None
        else (d.get("note") or "-")
    )
    return {
        "name": str(d.get("name", d.get("id"))),
        "util": util,
        "mem": f"{fmt_bytes(d.get('mem_used_bytes'))} / {fmt_bytes(d.get('mem_total_bytes'))}",
        "power": "-" if d.get("power_w") is None else f"{d['power_w']:.1f} W",
        "energy": energy,
    }


class MonitorApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "adaptyst-top"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("p", "pause", "Pause"),
        Binding("space", "toggle_probe", "On/off"),
    ]

    def __init__(self, session: Session, interval: float = 1.0) -> None:
        super().__init__()
        self.session = session
        self.interval = interval
        self.paused = False
        self.row_ids: dict[str, int | None] = {}

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
        target = f"pid {self.session.pid}" if self.session.pid else "no target"
        self.sub_title = f"{socket.gethostname()}  {target}  every {self.interval:g}s"
        for key, label in DEVICE_COLUMNS:
            self.query_one("#devices", DataTable).add_column(label, key=key)
        for key, label in PROBE_COLUMNS:
            self.query_one("#probes", DataTable).add_column(label, key=key)
        if self.session.engine is None:
            self.set_status("no probes attached (use --probe SPEC)")
        self.tick()
        self.set_interval(self.interval, self.tick)

    def set_status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    @work(thread=True, exclusive=True)
    def tick(self) -> None:
        if self.paused:
            return
        snap = self.session.hub.snapshot()
        self.call_from_thread(self.show, snap)

    def show(self, snap: dict[str, Any]) -> None:
        self._fill(self.query_one("#devices", DataTable), snap["devices"], device_cells, "id")
        self._fill(self.query_one("#probes", DataTable), snap["probes"], probe_cells, None)
        if snap.get("warnings"):
            self.set_status(snap["warnings"][-1])

    def _fill(
        self,
        table: DataTable[str],
        items: list[dict[str, Any]],
        cells_of: Any,
        key_field: str | None,
    ) -> None:
        for item in items:
            key = (
                str(item[key_field])
                if key_field
                else f"{item.get('spec')}|{item.get('name')}|{item.get('key')}"
            )
            cells = cells_of(item)
            if key in table.rows:
                for col, value in cells.items():
                    if table.get_cell(key, col) != value:  # touch only what changed
                        table.update_cell(key, col, value)
            else:
                table.add_row(*cells.values(), key=key)
                if key_field is None:
                    self.row_ids[key] = item.get("id")

    def action_pause(self) -> None:
        self.paused = not self.paused
        self.set_status("paused" if self.paused else "")

    def action_toggle_probe(self) -> None:
        engine = self.session.engine
        table = self.query_one("#probes", DataTable)
        if engine is None or table.row_count == 0:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        row_id = self.row_ids.get(str(key))
        if row_id is None:
            return
        try:
            on = engine.toggle(row_id)
            self.set_status(f"probe {'on' if on else 'off'}")
        except Exception as exc:  # the engine's ProbeError: one line in the status bar
            self.set_status(str(exc))
