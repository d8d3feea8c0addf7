"""Screenshots of the profile from a real run (root): the monitor with no target opens
on the process list, a busy program built without frame pointers is picked, its profile
and flame graph fill in, and `u` on its hottest function adds an exact probe (its
histogram opens; the probes pane is shot after it). Saved at
80x24 and 200x50 as screenshots/profile-*.svg.

    sudo .venv/bin/python -m scripts.profile_screenshots
"""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
from pathlib import Path

from adaptyst_top.runtime.session import open_session
from adaptyst_top.runtime.session_options import SessionOptions
from adaptyst_top.runtime.sources import LiveSource
from adaptyst_top.tui.app import MonitorApp
from adaptyst_top.tui.screens.detail import DetailScreen
from adaptyst_top.tui.screens.processes import ProcessScreen
from adaptyst_top.tui.screens.profile import ProfileScreen
from tests.support.paths import REPO, TARGETS
from tests.support.workload import build_c

OUT = REPO / "screenshots"


async def shoot(binary: Path, size: tuple[int, int]) -> None:
    tag = f"{size[0]}x{size[1]}"
    busy = subprocess.Popen([str(binary), "120"], stdout=subprocess.DEVNULL)
    session = open_session(SessionOptions())
    app = MonitorApp(LiveSource(session), interval=0.5)
    try:
        async with app.run_test(size=size) as pilot:
            for _ in range(40):
                await pilot.pause(0.25)
                screen = app.screen
                if isinstance(screen, ProcessScreen) and any(
                    r.pid == busy.pid for r in screen.rows
                ):
                    break
            await pilot.pause(1.5)  # a second reading: CPU shares
            assert isinstance(app.screen, ProcessScreen)
            app.save_screenshot(str(OUT / f"profile-processes-{tag}.svg"))
            screen = app.screen
            screen.row = next(i for i, r in enumerate(screen.rows) if r.pid == busy.pid)
            await pilot.press("enter")
            await pilot.pause(6)
            assert isinstance(app.screen, ProfileScreen)
            await pilot.press("tab", "down", "down", "down", "down", "down")  # in the graph
            await pilot.pause(0.6)
            app.save_screenshot(str(OUT / f"profile-{tag}.svg"))
            # Back in the list, the hottest by self time first: `u` probes it and opens
            # its histogram once it has counted.
            await pilot.press("tab", "u")
            session.ensure_engine().wait(60)
            for _ in range(40):
                await pilot.pause(0.25)
                if isinstance(app.screen, DetailScreen):
                    break
            await pilot.pause(2)
            await pilot.press("q")  # the probes pane, its new row
            await pilot.pause(1)
            app.save_screenshot(str(OUT / f"profile-probed-{tag}.svg"))
    finally:
        session.close()
        busy.kill()
        busy.wait()


async def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        Path(d).chmod(0o755)
        binary = build_c(TARGETS / "profiled.c", Path(d), "-O2", "-fomit-frame-pointer", "-pthread")
        for size in ((80, 24), (200, 50)):
            await shoot(binary, size)


if __name__ == "__main__":
    asyncio.run(main())
