"""What `f` and `l` do, apart from the app's other keys: the profile screen, the process
list, and a pick from that list (the session samples the process from then on)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from textual.app import App

from adaptyst_top.collectors.processes import ProcessTable
from adaptyst_top.runtime.sources import ActionError, Source
from adaptyst_top.tui.profile_view import ProfileView
from adaptyst_top.tui.screens.processes import ProcessScreen
from adaptyst_top.tui.screens.profile import ProfileScreen
from adaptyst_top.tui.widgets.probes_pane import ProbesPane

Status = Callable[[str], None]


def _screen(
    view: ProfileView,
    source: Source,
    add: Callable[[str], object],
    say: Status,
    ascii: bool,
    added: Callable[[str], object] = lambda spec: None,
) -> ProfileScreen:
    def probe(spec: str) -> None:  # `u` on a function: added as the picker adds a spec
        if source.read_only:
            say("a replay is read-only")
        else:
            add(spec)
            added(spec)

    return ProfileScreen(view, probe, ascii)


def open_profile(
    app: App[Any],
    view: ProfileView,
    source: Source,
    add: Callable[[str], object],
    say: Status,
    ascii: bool,
    added: Callable[[str], object] = lambda spec: None,
) -> None:
    """ADDED: told of each spec `u` adds (the app shows its row's histogram)."""
    if not view.hz:
        say("no profile in this session (--profile samples one, l picks a process)")
        return
    app.push_screen(_screen(view, source, add, say, ascii, added))


def open_processes(
    app: App[Any],
    view: ProfileView,
    source: Source,
    add: Callable[[str], object],
    say: Status,
    ascii: bool,
) -> None:
    if source.read_only:
        say("a replay is read-only")
        return
    uid = None if os.geteuid() == 0 else os.getuid()
    whose = "every process" if uid is None else "your processes"
    title = f"{whose}, by CPU: enter profiles one (its threads, on and off the CPU)"

    def pick(pid: int) -> None:
        try:
            source.profile(pid)
        except ActionError as exc:
            say(str(exc))
            return
        view.reset()
        say(f"profiling PID {pid}")
        app.pop_screen()
        app.push_screen(_screen(view, source, add, say, ascii))

    app.push_screen(ProcessScreen(ProcessTable(uid), pick, title))


class DetailAfter:
    """`u` in the profile: back to the probes, and the new row's histogram once it has
    counted a call (a python: or device row is keyed by name from its first: the row
    before it goes away); nothing when it failed (the add said why)."""

    def __init__(self) -> None:
        self.spec: str | None = None

    def want(self, app: App[Any], spec: str) -> None:
        self.spec = spec
        if isinstance(app.screen, ProfileScreen):
            app.pop_screen()

    def ready(self, probes: ProbesPane) -> str | None:
        """The row to show now (once), or None."""
        if self.spec is None:
            return None
        mine = [(k, e) for k, e in probes.entries.items() if e.spec == self.spec]
        if any(e.state == "error" for _, e in mine):
            self.spec = None
        key = next((k for k, e in mine if e.count > 0 and k in probes.order), None)
        if key is not None:
            self.spec = None
        return key
