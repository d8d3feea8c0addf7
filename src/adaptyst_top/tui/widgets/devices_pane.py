"""The devices pane: one row per physical device, with its utilisation history, and
under a GPU the user's processes on it (tui/rows.py: gpu_process_rows). An
OpenCL device that runs on one of them (PoCL on the CPU, a GPU's OpenCL driver) is that
device's OpenCL view, not a second device whose figures could be added up: its name
joins the physical device's row. The snapshot keeps listing it (the advisor needs it)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from adaptyst_top.snapshot import DeviceReading, NodeState
from adaptyst_top.tui.rows import DEVICE_COLUMNS, device_row, gpu_process_rows
from adaptyst_top.tui.widgets.fast_table import FastTable

HISTORY = 120  # samples kept per row: bounded, however long the run
MAX_HEIGHT = 10


class DevicesPane(FastTable):
    def __init__(self, ascii: bool = False, util_warn: float = 0.9) -> None:
        super().__init__(DEVICE_COLUMNS, id="devices")
        self.sort_key = "at"  # a GPU's process rows stay under it, in the snapshot's order
        self.border_title = "Devices"
        self.ascii = ascii
        self.util_warn = util_warn
        self.history: dict[str, deque[float | None]] = {}
        self._height = 0

    def show(self, devices: Sequence[DeviceReading], nodes: Sequence[NodeState] = ()) -> None:
        """NODES: a job's nodes (merged in one view): a node that does not answer is a
        row saying why, first; those that do show their devices under their names."""
        ids = {d.id for d in devices}
        views: dict[str, list[str]] = {}  # physical device -> the OpenCL names it runs
        for d in devices:
            on = d.extra.get("maps_to") if d.kind == "opencl" else None
            if on in ids:
                views.setdefault(str(on), []).append(d.name)
        seen, shown = set(), set()
        for i, n in enumerate(x for x in nodes if x.state != "ok"):
            key = f"node\x1f{n.name}"
            self.upsert(
                key,
                {"name": f"{n.name}: {n.state}: {n.reason or ''}"},
                {"at": (-1, i)},
                style="warn",
            )
            shown.add(key)
        for i, d in enumerate(devices):
            if d.kind == "opencl" and d.extra.get("maps_to") in ids:
                continue
            seen.add(d.id)
            hist = self.history.setdefault(d.id, deque(maxlen=HISTORY))
            hist.append(d.util)
            cells, style = device_row(d, hist, self.ascii, self.util_warn)
            if d.id in views:
                cells["name"] += " · OpenCL: " + ", ".join(views[d.id])
            self.upsert(d.id, cells, {"at": (i, 0)}, style=style)
            shown.add(d.id)
            if d.kind == "gpu":
                for j, (key, row) in enumerate(gpu_process_rows(d), 1):
                    self.upsert(key, row, {"at": (i, j)}, style="dim")
                    shown.add(key)
        self.retain(shown)
        for gone in set(self.history) - seen:
            del self.history[gone]
        height = min(MAX_HEIGHT, len(self.rows) + 3)
        if self._height != height:  # a style write re-lays out the screen
            self._height = height
            self.styles.height = height
