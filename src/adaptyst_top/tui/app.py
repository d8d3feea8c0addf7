"""The monitor: header, devices, probes and advisor panes, status line, footer.

Snapshots are taken on a thread worker (the hub touches kernel maps and /proc) and
handed to the UI thread, which updates only the table rows that changed.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any, ClassVar

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.containers import Vertical
from textual.driver import Driver
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer

from adaptyst_top.collectors.probes.cost.budget import budget_text, share_text
from adaptyst_top.runtime.config import Config
from adaptyst_top.runtime.sources import ActionError, Source
from adaptyst_top.snapshot import ProbeRef, Snapshot, TaskEntry
from adaptyst_top.tui.keys import BINDINGS as KEY_BINDINGS
from adaptyst_top.tui.power_history import PowerHistory
from adaptyst_top.tui.profile_keys import DetailAfter, open_processes, open_profile
from adaptyst_top.tui.profile_view import ProfileView
from adaptyst_top.tui.quit_signals import quit_on_signals
from adaptyst_top.tui.rank_view import VIEWS
from adaptyst_top.tui.rows import SORTABLE, app_name
from adaptyst_top.tui.screens.detail import DetailScreen
from adaptyst_top.tui.screens.help import HelpScreen
from adaptyst_top.tui.screens.picker import AddProbeScreen
from adaptyst_top.tui.screens.power_plot import PowerScreen
from adaptyst_top.tui.screens.profile import ProfileScreen
from adaptyst_top.tui.screens.prompt import ask_filter
from adaptyst_top.tui.screens.task_plot import TaskScreen
from adaptyst_top.tui.snapshot_feed import SnapshotFeed
from adaptyst_top.tui.textual_private import one_write, quiet, use_stock
from adaptyst_top.tui.widgets.advisor_pane import AdvisorPane
from adaptyst_top.tui.widgets.devices_pane import DevicesPane
from adaptyst_top.tui.widgets.probes_pane import ProbesPane
from adaptyst_top.tui.widgets.text_line import TextLine

MIN_INTERVAL, MAX_INTERVAL = 0.25, 60.0


class Fed(Message):
    """A snapshot from the feed (None: a replay's end)."""

    def __init__(self, snap: Snapshot | None) -> None:
        super().__init__()
        self.snap = snap


class MonitorApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "adaptyst-top"
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]  # noqa: RUF012 - Textual's own
    BINDINGS: ClassVar[list[BindingType]] = list(KEY_BINDINGS)  # tui/keys.py

    def get_driver_class(self) -> type[Driver]:
        return quiet(super().get_driver_class())  # no 0.1 s input poll

    def __init__(
        self,
        source: Source,
        interval: float = 1.0,
        config: Config | None = None,
        ascii: bool = False,
        speed: float = 1.0,
        autoplay: bool = True,
        profile_first: bool = False,
    ) -> None:
        super().__init__()
        self.source = source
        self.config = config or Config()
        if self.config.stock_rendering:
            use_stock("the config's stock_rendering")
        self.interval = interval
        self.ascii = ascii or self.config.ascii
        self.speed = speed
        self.autoplay = autoplay
        self.profile_first = profile_first  # --profile, no probe: its screen once it has one
        self.paused = False
        self.snap: Snapshot | None = None
        self.power_history = PowerHistory()  # what `e` plots, from every snapshot shown
        self.detail_after = DetailAfter()
        self.profile_view = ProfileView()  # what `f` shows, every snapshot's stacks summed
        self.sort_index = 0  # the probes pane starts sorted by SORTABLE[0]
        self.feed: SnapshotFeed[Snapshot] | None = None
        self._header = ""
        self._status = ""

    # ----- layout ---------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield TextLine(id="header")
        with Vertical(id="main"):
            yield DevicesPane(self.ascii, self.config.util_warn)
            yield ProbesPane(self.config.p99_warn_ms * 1e6)
            yield AdvisorPane(self.ascii)
        yield TextLine(id="status")
        yield Footer()

    @property
    def probes(self) -> ProbesPane:
        return self.query_one(ProbesPane)

    @property
    def advisor(self) -> AdvisorPane:
        return self.query_one(AdvisorPane)

    @property
    def advisor_mode(self) -> str:
        return self.advisor.mode

    def on_mount(self) -> None:
        if self.config.theme in self.available_themes:
            self.theme = self.config.theme
        if self.ascii:
            self.screen.add_class("ascii")
        self.probes.focus()
        if not self.is_headless:
            quit_on_signals(self)
        if self.source.untargeted:  # nothing to watch yet: pick a process
            self.call_after_refresh(self.action_processes)
        if self.autoplay:
            self.feed = SnapshotFeed(
                self.source.snapshot,
                lambda snap: self.post_message(Fed(snap)),
                self._period(),
                paused=lambda: self.paused,
                fail=lambda why: self.call_later(self.set_status, why),
            )

    def on_unmount(self) -> None:
        if self.feed is not None:
            self.source.stop()  # a snapshot waiting on a stalled agent ends now
            self.feed.close()  # no snapshot is taken once the session may close

    def _period(self) -> float:
        return self.interval / (self.speed if self.source.read_only else 1.0)

    def _restart_timer(self) -> None:
        if self.feed is not None:
            self.feed.set_period(self._period())

    # ----- data -------------------------------------------------------------------------

    def on_fed(self, message: Fed) -> None:
        self.show(message.snap)

    def tick(self) -> None:
        """A snapshot as soon as can be (after a toggle, or for the detail screen)."""
        if self.feed is not None:
            self.feed.kick()
        elif not self.paused:
            self.step()

    def step(self) -> None:
        """One snapshot now, on the UI thread (replay stepping, tests)."""
        self.show(self.source.snapshot())

    def action_step(self) -> None:
        if self.source.read_only:
            self.step()
        else:
            self.set_status("stepping is for replays")

    def show(self, snap: Snapshot | None) -> None:
        if snap is None:  # the feed has ended with it
            self.set_status("replay ended: q quits")
            return
        self.snap = snap
        self.power_history.add(snap.t, snap.devices)
        self.profile_view.add(snap)
        with one_write(self):  # the panes' direct paints: one hand-off to the writer
            self.query_one(DevicesPane).show(snap.devices, snap.nodes)
            self.probes.show(snap.probes, self.source.read_only, app_name(snap.command), snap.host)
            self.advisor.show(snap)
            self._show_header(snap)
            if snap.warnings:
                self.set_status(snap.warnings[-1])
        if self.screen is self.screen_stack[0] and self.profile_first and self.profile_view.hz:
            self.profile_first = False
            self.action_profile()  # not an empty probes pane first (issue 74's newcomer)
        elif self.screen is self.screen_stack[0] and (row := self.detail_after.ready(self.probes)):
            self.probes.cursor = self.probes.order.index(row)
            self.probes.focus()
            self.action_detail()  # a screen pushed now is drawn once mounted
        elif isinstance(self.screen, DetailScreen):
            self._update_detail(self.screen)
        elif isinstance(self.screen, TaskScreen):
            self.screen.show(self._task_entry(self.screen.task_name))
        elif isinstance(self.screen, PowerScreen):
            self.screen.show(self.power_history)
        elif isinstance(self.screen, ProfileScreen):
            self.screen.redraw()

    def _task_entry(self, name: str) -> TaskEntry | None:
        return next((t for t in self.snap.tasks if t.task == name), None) if self.snap else None

    def _show_header(self, snap: Snapshot) -> None:
        target = self.source.target
        scope = snap.target  # how many processes the probes attach to now
        if scope is not None and scope.name.startswith("job"):
            target += f": {len(scope.pids)} processes"
        elif scope is not None and len(scope.pids) > 1:
            target += f" +{len(scope.pids) - 1} started"
        parts = [snap.host or self.source.host, target, f"{self.interval:g}s"]
        if self.source.read_only:
            parts.append(f"t={snap.t:.0f}s x{self.speed:g}")
        over = snap.overhead
        n = len(snap.probes)  # the rows probed, whichever view (R) the pane shows
        if over is not None:
            text = "?" if over.share is None else share_text(over.share)
            flag = " OVER" if over.share is not None and over.share > over.budget else ""
            parts.insert(
                2, f"{n} probes cost {text} of target CPU (budget {budget_text(over.budget)}){flag}"
            )
        elif n:
            parts.append(f"{n} probes")
        if cost := self.profile_view.cost_text():
            parts.append(cost)
        if self.paused:
            parts.append("PAUSED")
        header = "  │  ".join(parts) if not self.ascii else "  |  ".join(parts)
        if header != self._header:
            self._header = header
            self.query_one("#header", TextLine).text = header

    @property
    def status(self) -> str:
        """What the status line says now."""
        return self._status

    def set_status(self, text: str) -> None:
        if text != self._status:
            self._status = text
            self.query_one("#status", TextLine).text = text

    # ----- actions ----------------------------------------------------------------------

    def action_toggle_probe(self) -> None:
        p = self.probes.selected()
        if p is None or p.id is None:
            self.set_status("no probe selected")
            return
        self._toggle(p.ref, p.name)

    @work(thread=True, group="control")
    def _toggle(self, ref: ProbeRef, name: str) -> None:
        try:
            on = self.source.toggle(ref)
        except ActionError as exc:
            self.call_from_thread(self.set_status, str(exc))
            return
        self.call_from_thread(self.set_status, f"{name}: {'on' if on else 'off'}")
        self.call_from_thread(self.tick)

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
        except ActionError as exc:
            self.call_from_thread(self.set_status, str(exc))
            return
        self.call_from_thread(self.set_status, f"adding {spec} (compiling in the background)")

    def action_remove_probe(self) -> None:
        p = self.probes.selected()
        if p is None:
            self.set_status("no probe selected")
            return
        self._remove(p.ref)

    @work(thread=True, group="control")
    def _remove(self, ref: ProbeRef) -> None:
        """Off the UI thread: closing a module detaches its probes in the kernel (~0.1 s
        each)."""
        try:
            spec = self.source.remove(ref)
        except ActionError as exc:
            self.call_from_thread(self.set_status, str(exc))
            return
        self.call_from_thread(self._removed, ref.group, spec)

    def _removed(self, group: int | str, spec: str) -> None:
        self.set_status(f"removed {spec}")
        self.probes.drop_group(group)

    def action_detail(self) -> None:
        if self.focused is self.advisor.tasks:
            task = self.advisor.selected_task()
            if task is not None:
                plots = TaskScreen(task, self.ascii)
                self.push_screen(plots)
                self.call_after_refresh(lambda: plots.show(self._task_entry(task)))
                return
        key = self.probes.selected_key
        if key is None:
            self.set_status("no probe selected")
            return
        screen = DetailScreen(key, self.ascii)
        self._want_hist(True)
        self.push_screen(screen, lambda _: self._want_hist(False))
        self.call_after_refresh(self._update_detail, screen)

    def _want_hist(self, on: bool) -> None:
        if self.source.want_hist == on:
            return
        self.source.want_hist = on
        if on:
            self.tick()  # the histogram now rather than at the next refresh

    def _update_detail(self, screen: DetailScreen) -> None:
        probes = self.probes
        screen.key = probes.follow(screen.key)
        screen.show(
            probes.entries.get(screen.key),
            list(probes.rate_history.get(screen.key, [])),
            list(probes.p99_history.get(screen.key, [])),
            self.snap.energy_split if self.snap is not None else (),
            self.snap.profile if self.snap is not None else None,
        )

    def action_power(self) -> None:
        screen = PowerScreen(self.ascii)
        self.push_screen(screen)
        self.call_after_refresh(lambda: screen.show(self.power_history))

    def action_profile(self) -> None:
        added = partial(self.detail_after.want, self)  # `u`: its histogram, once counted
        open_profile(
            self, self.profile_view, self.source, self._add, self.set_status, self.ascii, added
        )

    def action_processes(self) -> None:
        open_processes(self, self.profile_view, self.source, self._add, self.set_status, self.ascii)

    def action_filter(self) -> None:
        ask_filter(self, self.probes, "probes", self.set_status)

    def action_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTABLE)
        table = self.probes
        column = SORTABLE[self.sort_index]
        table.set_sort(column, reverse=column != "name")
        self.set_status(f"sorted by {column}")

    def action_rank_view(self) -> None:
        pane = self.probes
        pane.view = VIEWS[(VIEWS.index(pane.view) + 1) % len(VIEWS)]
        if (snap := self.snap) is not None:
            with one_write(self):
                pane.show(snap.probes, self.source.read_only, app_name(snap.command), snap.host)
        has_ranks = any(p.parts for p in pane.entries.values())
        self.set_status(
            f"probe rows: {pane.view if pane.view == 'merged' else 'per ' + pane.view}"
            + ("" if has_ranks else " (for a job's rows, or --ranks)")
        )

    def action_sort_reverse(self) -> None:
        table = self.probes
        if table.sort_key is None:
            self.action_sort()
        table.set_sort(table.sort_key, not table.sort_reverse)

    def action_pause(self) -> None:
        self.paused = not self.paused
        self.set_status("paused: p resumes" if self.paused else "resumed")
        if self.snap is not None:
            self._show_header(self.snap)

    def action_interval(self, factor: float) -> None:
        self.interval = min(MAX_INTERVAL, max(MIN_INTERVAL, self.interval * factor))
        self._restart_timer()
        self.set_status(f"refresh every {self.interval:g}s")
        if self.snap is not None:
            self._show_header(self.snap)

    def action_speed(self, factor: float) -> None:
        if not self.source.read_only:  # said, not ignored: a newcomer pressed it live
            self.set_status("< and > set a replay's speed; live, + and - set the refresh")
            return
        self.speed = min(1000.0, max(0.125, self.speed * factor))
        self._restart_timer()
        self.set_status(f"replay speed x{self.speed:g}")

    def action_apply_advice(self) -> None:
        task = self.advisor.selected_task()
        if task is None:
            self.set_status("no advice to apply")
            return
        self._apply_advice(task)

    @work(thread=True, group="control")
    def _apply_advice(self, task: str) -> None:
        """Off the UI thread: telling the applications is a socket write each."""
        try:
            self.source.apply_advice(task)
        except ActionError as exc:
            self.call_from_thread(self.set_status, str(exc))
            return
        self.call_from_thread(self.set_status, f"applied advice for {task}")

    def action_advisor_mode(self) -> None:
        pane = self.advisor
        pane.mode = "auto" if pane.mode == "suggest" else "suggest"
        self.source.set_advisor_mode(pane.mode)
        pane.show_state()
        self.set_status(f"advisor mode: {pane.mode}")

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
