"""What `f` and `l` do, apart from the app's other keys: the profile screen, the process
list, and a pick from that list (the session samples the process from then on)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from adaptyst_top.collectors.processes import ProcessTable
from adaptyst_top.runtime.sources import ActionError
from adaptyst_top.tui.profile_view import ProfileView
from adaptyst_top.tui.screens.processes import ProcessScreen
from adaptyst_top.tui.screens.profile import ProfileScreen

if TYPE_CHECKING:
    from adaptyst_top.tui.app import MonitorApp


def _screen(app: MonitorApp) -> ProfileScreen:
    def probe(spec: str) -> None:  # `u` on a function: added as the picker adds a spec
        if app.source.read_only:
            app.set_status("a replay is read-only")
        else:
            app._add(spec)

    return ProfileScreen(app.profile_view, probe, app.ascii)


def open_profile(app: MonitorApp) -> None:
    if not app.profile_view.hz:
        app.set_status("no profile in this session (--profile samples one, l picks a process)")
        return
    app.push_screen(_screen(app))


def open_processes(app: MonitorApp) -> None:
    if app.source.read_only:
        app.set_status("a replay is read-only")
        return
    uid = None if os.geteuid() == 0 else os.getuid()
    whose = "every process" if uid is None else "your processes"
    title = f"{whose}, by CPU: enter profiles one (its threads, on and off the CPU)"

    def pick(pid: int) -> None:
        try:
            app.source.profile(pid)
        except ActionError as exc:
            app.set_status(str(exc))
            return
        app.profile_view = ProfileView()
        app.set_status(f"profiling PID {pid}")
        app.pop_screen()
        app.push_screen(_screen(app))

    app.push_screen(ProcessScreen(ProcessTable(uid), pick, title))
