"""The cluster view: a row per node from Prometheus (runtime/cluster.py), the same keys
and looks as the node monitor; Enter opens the node's live monitor over SSH.

Queries run on a thread worker; the table re-renders only the rows that changed.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import ClassVar

from textual import work
from textual.app import App, ComposeResult, SuspendNotSupported
from textual.binding import Binding, BindingType
from textual.driver import Driver
from textual.widgets import Footer

from adaptyst_top.runtime.cluster import (
    MAX_SERIES,
    QUERIES,
    STALE_AFTER_S,
    ClusterError,
    NodeRow,
    Prometheus,
    read_cluster,
)
from adaptyst_top.tui.columns import Column
from adaptyst_top.tui.format import fmt_ns
from adaptyst_top.tui.screens.prompt import ask_filter
from adaptyst_top.tui.textual_private import quiet
from adaptyst_top.tui.widgets.fast_table import FastTable
from adaptyst_top.tui.widgets.text_line import TextLine

CLUSTER_COLUMNS = [
    Column("node", "NODE", 0, priority=10),
    Column("cpu", "CPU%", 5, right=True, priority=9),
    Column("gpu", "GPU%", 5, right=True, priority=8),
    Column("fpga", "FPGA%", 6, right=True, priority=2),
    Column("power", "POWER W", 8, right=True, priority=7),
    Column("energy", "ENERGY W", 9, right=True, priority=3),
    Column("jobs", "JOBS", 0, priority=5),
    Column("p99", "SLOWEST P99", 0, priority=6),
    Column("seen", "SEEN", 9, priority=4),
    Column("tasks", "TASKS ON", 0, priority=1),
]
SORTS = ("node", "cpu", "gpu", "power", "p99")
IMPOSSIBLE = "?"  # a figure Prometheus gave that cannot be (negative, not finite, too large)


def _pct(row: NodeRow, kind: str) -> str:
    if f"util:{kind}" in row.impossible:
        return IMPOSSIBLE
    v = row.util.get(kind)
    return "" if v is None else f"{100 * v:.0f}"


def _watts(row: NodeRow, what: str) -> str:
    if any(i.startswith(f"{what}:") for i in row.impossible):
        return IMPOSSIBLE  # a sum with an impossible part is not a sum
    per_kind: dict[str, float] = getattr(row, what)
    return f"{sum(per_kind.values()):.0f}" if per_kind else ""


def node_cells(row: NodeRow) -> tuple[dict[str, str], dict[str, object], str]:
    """A node's cells, its sort values, and its style (stale nodes dim)."""
    power = sum(row.power_w.values()) if row.power_w else None
    slowest = f"{fmt_ns(row.slowest[1] * 1e9)} {row.slowest[0]}" if row.slowest else ""
    if "p99" in row.impossible and not slowest:
        slowest = IMPOSSIBLE
    seen = time.strftime("%H:%M:%S", time.localtime(row.last_seen))
    cells = {
        "node": row.node,
        "cpu": _pct(row, "cpu"),
        "gpu": _pct(row, "gpu"),
        "fpga": _pct(row, "fpga"),
        "power": _watts(row, "power_w"),
        "energy": _watts(row, "energy_w"),
        "jobs": ",".join(sorted(row.jobs)),
        "p99": slowest,
        "seen": f"stale {seen}" if row.stale else seen,
        "tasks": " ".join(f"{t}@{d}" for t, d in sorted(row.tasks)),
    }
    sort = {
        "node": row.node,
        "cpu": row.util.get("cpu", -1.0),
        "gpu": row.util.get("gpu", -1.0),
        "power": power if power is not None else -1.0,
        "p99": row.slowest[1] if row.slowest else -1.0,
    }
    return cells, sort, "dim" if row.stale else ""


class ClusterApp(App[None]):
    CSS = """
    #header { height: 1; background: $panel; text-style: bold; }
    #nodes { height: 1fr; border: round $primary; border-title-color: $primary; }
    #status { height: 1; color: $text-muted; }
    """
    TITLE = "adaptyst-top cluster"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("enter", "open_node", "Open node"),
        Binding("slash", "filter", "Filter"),
        Binding("s", "sort", "Sort"),
        Binding("r", "refresh_now", "Refresh"),
    ]

    def get_driver_class(self) -> type[Driver]:
        return quiet(super().get_driver_class())  # no 0.1 s input poll

    def __init__(
        self,
        prom: Prometheus,
        job: str | None = None,
        interval: float = 5.0,
        stale_after: float = STALE_AFTER_S,
    ) -> None:
        super().__init__()
        self.prom = prom
        self.job = job
        self.interval = interval
        self.stale_after = stale_after
        self.sort_index = 0
        self.rows: list[NodeRow] = []
        self._asking: tuple[float, int] | None = None  # (since, query n of QUERIES) under way

    def compose(self) -> ComposeResult:
        yield TextLine(id="header")
        table = FastTable(CLUSTER_COLUMNS, id="nodes")
        table.border_title = "Nodes"
        yield table
        yield TextLine(id="status")
        yield Footer()

    @property
    def table(self) -> FastTable:
        return self.query_one(FastTable)

    def on_mount(self) -> None:
        self.table.focus()
        self.table.set_sort("node")
        self.refresh_now()
        self.set_interval(self.interval, self.refresh_now)
        self.set_interval(0.5, self._show_asking)  # a slow query's time, as it runs

    @work(thread=True, exclusive=True, group="query")
    def refresh_now(self) -> None:
        start = time.monotonic()
        self.prom.skipped = self.prom.cut = 0

        def asking(n: int) -> None:
            self._asking = (start, n)
            if not self.rows:  # said at once while nothing is shown; later by the timer
                with contextlib.suppress(RuntimeError):  # quitting: no app to tell
                    self.call_from_thread(self._show_asking)

        try:
            rows = read_cluster(self.prom, self.job, self.stale_after, asking)
        except ClusterError as exc:
            self._asking = None
            with contextlib.suppress(RuntimeError):
                self.call_from_thread(self.set_status, str(exc))
            return
        self._asking = None
        with contextlib.suppress(RuntimeError):
            self.call_from_thread(self.show, rows, time.monotonic() - start, self.prom.skipped)

    def _show_asking(self) -> None:
        if (asking := self._asking) is not None:
            since, n = asking
            took = time.monotonic() - since
            self.set_status(f"asking Prometheus: query {n} of {QUERIES}, {took:.1f} s")

    async def action_quit(self) -> None:
        self.prom.abort()  # a query under way ends now, not at its deadline
        self.exit()

    def action_refresh_now(self) -> None:
        self.refresh_now()

    def show(self, rows: Sequence[NodeRow], took_s: float = 0.0, skipped: int = 0) -> None:
        self.rows = list(rows)
        self.table.replace_all((row.node, *node_cells(row)) for row in rows)
        stale = sum(r.stale for r in rows)
        parts = [
            "cluster",
            f"{len(rows)} nodes" + (f" ({stale} stale)" if stale else ""),
            f"job {self.job}" if self.job else self.prom.url,
            f"{took_s * 1000:.0f} ms",
        ]
        self.query_one("#header", TextLine).text = "  │  ".join(parts)
        impossible = sum(len(r.impossible) for r in rows)
        said = []
        if self.prom.cut:
            said.append(
                f"{self.prom.cut} series past the first {MAX_SERIES:,} of an answer: not read"
                " (narrow it with --job)"
            )
        if skipped:
            said.append(f"{skipped} series of the wrong shape in Prometheus' answers: skipped")
        if impossible:
            said.append(
                f"{impossible} impossible values (negative, not finite, too large): {IMPOSSIBLE}"
            )
        if not rows:
            said.append(
                f"no node runs job {self.job}" if self.job else "no adaptyst-top agent reports"
            )
        self.set_status("; ".join(said) if said else f"refreshed in {took_s:.1f} s")

    def set_status(self, text: str) -> None:
        self.query_one("#status", TextLine).text = text

    def action_filter(self) -> None:
        ask_filter(self, self.table, "nodes", self.set_status)

    def action_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        key = SORTS[self.sort_index]
        self.table.set_sort(key, reverse=key != "node")
        self.set_status(f"sorted by {key}")

    def action_open_node(self) -> None:
        node = self.table.selected_key
        if node is None:
            return
        argv = [sys.executable, "-m", "adaptyst_top.cli.start", "--host", node]
        if self.job:
            argv += ["--job", self.job]
        try:
            with self.suspend():  # the node's monitor gets the terminal, then gives it back
                status = subprocess.call(argv)
        except SuspendNotSupported:  # no terminal to give (headless, tests)
            status = subprocess.call(argv, stdin=subprocess.DEVNULL)
        self.set_status(f"{node}: the monitor ended with status {status}")
