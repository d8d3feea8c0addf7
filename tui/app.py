"""The monitor: header, devices, probes and advisor panes, status line, footer.

Snapshots are taken on a thread worker (the hub touches kernel maps and /proc) and
handed to the UI thread, which updates only the table rows that changed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any, ClassVar, Protocol

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer

from adaptyst_top.tui.config import Config
from adaptyst_top.tui.rows import (
    ADVICE_COLUMNS,
    DEVICE_COLUMNS,
    PROBE_COLUMNS,
    SORTABLE,
    advice_row,
    device_row,
    probe_key,
    probe_row,
)
from adaptyst_top.tui.screens.detail import DetailScreen
from adaptyst_top.tui.screens.help import HelpScreen
from adaptyst_top.tui.screens.picker import AddProbeScreen
from adaptyst_top.tui.screens.prompt import PromptScreen
from adaptyst_top.tui.widgets.fast_table import FastTable
from adaptyst_top.tui.widgets.text_line import TextLine

HISTORY = 120  # samples kept per device and per probe row: bounded, however long the run
MIN_INTERVAL, MAX_INTERVAL = 0.25, 60.0


class Source(Protocol):
    read_only: bool
    host: str

    @property
    def target(self) -> str: ...  # what is monitored, for the header

    def snapshot(self) -> dict[str, Any] | None: ...
    def toggle(self, row_id: int) -> bool: ...
    def add(self, spec: str) -> None: ...
    def remove(self, spec: str) -> None: ...
    def candidates(self) -> list[str]: ...


class MonitorApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "adaptyst-top"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("space", "toggle_probe", "On/off"),
        Binding("a", "add_probe", "Add"),
        Binding("d", "remove_probe", "Remove"),
        Binding("enter", "detail", "Detail"),
        Binding("slash", "filter", "Filter"),
        Binding("s", "sort", "Sort"),
        Binding("S", "sort_reverse", "Reverse", show=False),
        Binding("p", "pause", "Pause"),
        Binding("plus,equals_sign", "interval(2)", "Slower", show=False),
        Binding("minus", "interval(0.5)", "Faster", show=False),
        Binding("m", "apply_advice", "Apply", show=False),
        Binding("M", "advisor_mode", "Auto/suggest", show=False),
        Binding("greater_than_sign", "speed(2)", "Replay faster", show=False),
        Binding("full_stop", "step", "Step", show=False),
        Binding("less_than_sign", "speed(0.5)", "Replay slower", show=False),
    ]

    def __init__(
        self,
        source: Source,
        interval: float = 1.0,
        config: Config | None = None,
        ascii: bool = False,
        speed: float = 1.0,
        autoplay: bool = True,
    ) -> None:
        super().__init__()
        self.source = source
        self.config = config or Config()
        self.interval = interval
        self.ascii = ascii or self.config.ascii
        self.speed = speed
        self.autoplay = autoplay
        self.paused = False
        self.advisor_mode = "suggest"
        self.snap: dict[str, Any] = {}
        self.probes_by_key: dict[str, dict[str, Any]] = {}
        self.device_history: dict[str, deque[float | None]] = {}
        self.rate_history: dict[str, deque[float | None]] = {}
        self.p99_history: dict[str, deque[float | None]] = {}
        self.sort_index = -1
        self.timer: Timer | None = None
        self._header = ""
        self._status = ""
        self._advisor_text = ""
        self._devices_height = 0

    # ----- layout ---------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield TextLine(id="header")
        with Vertical(id="main"):
            devices = FastTable(DEVICE_COLUMNS, id="devices")
            devices.border_title = "Devices"
            yield devices
            probes = FastTable(PROBE_COLUMNS, id="probes")
            probes.border_title = "Probes"
            yield probes
            with Vertical(id="advisor"):
                yield TextLine(id="advisor-state")
                yield FastTable(ADVICE_COLUMNS, id="advice")
        yield TextLine(id="status")
        yield Footer()

    def on_mount(self) -> None:
        if self.config.theme in self.available_themes:
            self.theme = self.config.theme
        if self.ascii:
            self.screen.add_class("ascii")
        self.query_one("#advisor", Vertical).border_title = "Advisor"
        self.query_one("#probes", FastTable).focus()
        self.show_advisor_state()
        if self.autoplay:
            self.tick()
            self._restart_timer()

    def _restart_timer(self) -> None:
        if self.timer is not None:
            self.timer.stop()
        if not self.autoplay:
            return
        period = self.interval / (self.speed if self.source.read_only else 1.0)
        self.timer = self.set_interval(period, self.tick)

    # ----- data -------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="tick")
    def tick(self) -> None:
        if self.paused:
            return
        snap = self.source.snapshot()
        self.call_from_thread(self.show, snap)

    def step(self) -> None:
        """One snapshot now, on the UI thread (replay stepping, tests)."""
        self.show(self.source.snapshot())

    def action_step(self) -> None:
        if self.source.read_only:
            self.step()
        else:
            self.set_status("stepping is for replays")

    def show(self, snap: dict[str, Any] | None) -> None:
        if snap is None:
            if self.timer is not None:
                self.timer.stop()
            self.set_status("replay ended: q quits")
            return
        self.snap = snap
        self._show_devices(snap.get("devices", []))
        self._show_probes(snap.get("probes", []))
        self._show_advice(snap.get("advice", []))
        self._show_header(snap)
        warnings = snap.get("warnings") or []
        if warnings:
            self.set_status(warnings[-1])
        if isinstance(self.screen, DetailScreen):
            self._update_detail(self.screen)

    def _show_header(self, snap: dict[str, Any]) -> None:
        parts = [str(snap.get("host", self.source.host)), self.source.target, f"{self.interval:g}s"]
        if self.source.read_only:
            parts.append(f"t={snap.get('t', 0):.0f}s x{self.speed:g}")
        over = snap.get("overhead")
        n = len(self.probes_by_key)
        if over:
            share = over.get("share")
            budget = over.get("budget") or 0.0
            text = "?" if share is None else f"{share:.1%}"
            flag = " OVER" if share is not None and share > budget else ""
            parts.insert(2, f"{n} probes cost {text} of target CPU (budget {budget:.0%}){flag}")
        elif n:
            parts.append(f"{n} probes")
        if self.paused:
            parts.append("PAUSED")
        header = "  │  ".join(parts) if not self.ascii else "  |  ".join(parts)
        if header != self._header:
            self._header = header
            self.query_one("#header", TextLine).text = header

    def _show_devices(self, devices: Iterable[dict[str, Any]]) -> None:
        table = self.query_one("#devices", FastTable)
        seen = set()
        for d in devices:
            key = str(d.get("id"))
            seen.add(key)
            hist = self.device_history.setdefault(key, deque(maxlen=HISTORY))
            hist.append(d.get("util"))
            cells, style = device_row(d, hist, self.ascii, self.config.util_warn)
            table.upsert(key, cells, style=style)
        table.retain(seen)
        height = min(10, len(table.rows) + 3)
        if self._devices_height != height:  # a style write re-lays out the screen
            self._devices_height = height
            table.styles.height = height
        for gone in set(self.device_history) - seen:
            del self.device_history[gone]

    def _show_probes(self, probes: Iterable[dict[str, Any]]) -> None:
        table = self.query_one("#probes", FastTable)
        by_key = {}
        for p in probes:
            key = probe_key(p)
            by_key[key] = p
            self.rate_history.setdefault(key, deque(maxlen=HISTORY)).append(p.get("rate_hz"))
            self.p99_history.setdefault(key, deque(maxlen=HISTORY)).append(p.get("p99_ns"))
            cells, sort, style = probe_row(p, self.config.p99_warn_ms * 1e6)
            table.upsert(key, cells, sort, style)
        table.retain(set(by_key))
        for history in (self.rate_history, self.p99_history):
            for gone in set(history) - set(by_key):
                del history[gone]
        self.probes_by_key = by_key
        if not by_key:
            subtitle = "no probes: a adds one" if not self.source.read_only else "no probes"
        else:
            subtitle = f"{len(by_key)} rows" + (
                f", filter: {table.filter_text}" if table.filter_text else ""
            )
        if table.border_subtitle != subtitle:  # a border change repaints the pane
            table.border_subtitle = subtitle

    def _show_advice(self, advice: list[dict[str, Any]]) -> None:
        table = self.query_one("#advice", FastTable)
        keys = set()
        for a in advice:
            key = str(a.get("task"))
            keys.add(key)
            table.upsert(key, advice_row(a))
        table.retain(keys)
        if table.display != bool(advice):
            table.display = bool(advice)
        self.show_advisor_state()

    def show_advisor_state(self) -> None:
        state = self.snap.get("advisor") if self.snap else None
        if state:
            where = ", ".join(f"{t['task']} on {t['device']}" for t in self.snap.get("tasks", []))
            text = (
                f"advisor {state.get('state', '?')} ({state.get('mode', self.advisor_mode)}, "
                f"{state.get('objective', '?')}): {where or 'no task seen yet'}; "
                f"{state.get('detail', '')}"
            )
        else:
            text = (
                f"advisor ({self.advisor_mode}): not running — start with --advisor and task "
                "probes (adaptyst:task_begin..task_end), or `adaptyst-top demo`"
            )
        if text != self._advisor_text:  # an update re-lays out the pane
            self._advisor_text = text
            self.query_one("#advisor-state", TextLine).text = text

    @property
    def status(self) -> str:
        """What the status line says now."""
        return self._status

    def set_status(self, text: str) -> None:
        if text != self._status:
            self._status = text
            self.query_one("#status", TextLine).text = text

    # ----- actions ----------------------------------------------------------------------

    def _selected_probe(self) -> dict[str, Any] | None:
        key = self.query_one("#probes", FastTable).selected_key
        return self.probes_by_key.get(key) if key else None

    def action_toggle_probe(self) -> None:
        p = self._selected_probe()
        if p is None or p.get("id") is None:
            self.set_status("no probe selected")
            return
        self._toggle(int(p["id"]), str(p.get("name")))

    @work(thread=True, group="control")
    def _toggle(self, row_id: int, name: str) -> None:
        try:
            on = self.source.toggle(row_id)
            self.call_from_thread(self.set_status, f"{name}: {'on' if on else 'off'}")
            self.call_from_thread(self.tick)
        except Exception as exc:  # ProbeError / ReadOnly: one line in the status bar
            self.call_from_thread(self.set_status, str(exc))

    def action_add_probe(self) -> None:
        if self.source.read_only:
            self.set_status("a replay is read-only")
            return

        def added(spec: str | None) -> None:
            if spec:
                self._add(spec)

        self.push_screen(AddProbeScreen(self.source.candidates), added)

    @work(thread=True, group="control")
    def _add(self, spec: str) -> None:
        try:
            self.source.add(spec)
            self.call_from_thread(self.set_status, f"adding {spec} (compiling in the background)")
        except Exception as exc:
            self.call_from_thread(self.set_status, str(exc))

    def action_remove_probe(self) -> None:
        p = self._selected_probe()
        if p is None:
            self.set_status("no probe selected")
            return
        self._remove(str(p.get("spec")))

    @work(thread=True, group="control")
    def _remove(self, spec: str) -> None:
        """Off the UI thread: closing a module detaches its probes in the kernel (~0.1 s
        each)."""
        try:
            self.source.remove(spec)
        except Exception as exc:  # ProbeError / ReadOnly: one line in the status bar
            self.call_from_thread(self.set_status, str(exc))
            return
        self.call_from_thread(self._removed, spec)

    def _removed(self, spec: str) -> None:
        self.set_status(f"removed {spec}")
        table = self.query_one("#probes", FastTable)
        for key in [k for k, v in self.probes_by_key.items() if v.get("spec") == spec]:
            table.remove_row(key)
            self.probes_by_key.pop(key, None)

    def action_detail(self) -> None:
        key = self.query_one("#probes", FastTable).selected_key
        if key is None:
            self.set_status("no probe selected")
            return
        screen = DetailScreen(key, self.ascii)
        self._want_hist(True)
        self.push_screen(screen, lambda _: self._want_hist(False))
        self.call_after_refresh(self._update_detail, screen)

    def _want_hist(self, on: bool) -> None:
        if hasattr(self.source, "want_hist"):
            self.source.want_hist = on
            if on:
                self.tick()  # the histogram now rather than at the next refresh

    def _update_detail(self, screen: DetailScreen) -> None:
        screen.show(
            self.probes_by_key.get(screen.key),
            list(self.rate_history.get(screen.key, [])),
            list(self.p99_history.get(screen.key, [])),
        )

    def action_filter(self) -> None:
        table = self.query_one("#probes", FastTable)

        def done(text: str | None) -> None:
            if text is not None:
                table.set_filter(text.strip())
                self.set_status(f"filter: {text.strip()}" if text.strip() else "filter cleared")

        self.push_screen(PromptScreen("filter probes (empty clears)", table.filter_text), done)

    def action_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTABLE)
        table = self.query_one("#probes", FastTable)
        column = SORTABLE[self.sort_index]
        table.set_sort(column, reverse=column != "name")
        self.set_status(f"sorted by {column}")

    def action_sort_reverse(self) -> None:
        table = self.query_one("#probes", FastTable)
        if table.sort_key is None:
            self.action_sort()
        table.set_sort(table.sort_key, not table.sort_reverse)

    def action_pause(self) -> None:
        self.paused = not self.paused
        self.set_status("paused: p resumes" if self.paused else "resumed")
        if self.snap:
            self._show_header(self.snap)

    def action_interval(self, factor: float) -> None:
        self.interval = min(MAX_INTERVAL, max(MIN_INTERVAL, self.interval * factor))
        self._restart_timer()
        self.set_status(f"refresh every {self.interval:g}s")
        if self.snap:
            self._show_header(self.snap)

    def action_speed(self, factor: float) -> None:
        if not self.source.read_only:
            return
        self.speed = min(1000.0, max(0.125, self.speed * factor))
        self._restart_timer()
        self.set_status(f"replay speed x{self.speed:g}")

    def action_apply_advice(self) -> None:
        advice = self.query_one("#advice", FastTable)
        key = advice.selected_key if advice.rows else None
        apply = getattr(self.source, "apply_advice", None)
        if key is None or apply is None:
            self.set_status("no advice to apply")
            return
        try:
            apply(key)
            self.set_status(f"applied advice for {key}")
        except Exception as exc:
            self.set_status(str(exc))

    def action_advisor_mode(self) -> None:
        self.advisor_mode = "auto" if self.advisor_mode == "suggest" else "suggest"
        setter = getattr(self.source, "set_advisor_mode", None)
        if setter is not None:
            setter(self.advisor_mode)
        self.show_advisor_state()
        self.set_status(f"advisor mode: {self.advisor_mode}")

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "Add probe", "Pick a function or USDT probe to attach", self.action_add_probe
        )
        yield SystemCommand("Filter probes", "Show only rows containing a text", self.action_filter)
        yield SystemCommand("Sort probes", "Sort by the next column", self.action_sort)
        yield SystemCommand("Pause / resume", "Freeze the display", self.action_pause)
        yield SystemCommand(
            "Advisor mode", "Switch between suggest and auto", self.action_advisor_mode
        )
        yield SystemCommand("Keys", "Every key binding", self.action_help)
