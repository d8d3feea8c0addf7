"""The monitor under Textual's pilot: every key, on a replayed real recording (and, as
root, on a live probed target)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptyst_top.tui.app import MonitorApp
from adaptyst_top.tui.screens.picker import AddProbeScreen
from adaptyst_top.tui.widgets.fast_table import FastTable
from tests.unit.tui.pilot.test_tui import probe_names


@pytest.mark.ebpf
@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="eBPF needs root")
async def test_live_toggle_add_remove(workload_bin: Path) -> None:
    from adaptyst_top.runtime.session import open_session
    from adaptyst_top.runtime.session_options import ProbeSettings, SessionOptions, Target
    from adaptyst_top.runtime.sources import LiveSource
    from tests.support.bpf_objects import none_left

    session = open_session(
        SessionOptions(
            Target(command=[str(workload_bin), "forever", "300"]),
            ProbeSettings([f"uprobe:{workload_bin}:fast_fn"]),
        )
    )
    session.child.release()  # type: ignore[union-attr]
    app = MonitorApp(LiveSource(session), interval=0.25)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause(0.6)
            assert any(n == "fast_fn" for n in probe_names(app))
            await pilot.press("space")
            await pilot.pause(0.6)
            row = session.engine.groups[0].rows[0]  # type: ignore[union-attr]
            assert row.state == "detached"
            await pilot.press("a")
            assert isinstance(app.screen, AddProbeScreen)
            await pilot.press(*f"uprobe:{workload_bin}:held_fn", "enter")
            assert session.engine.wait(60)  # type: ignore[union-attr]
            await pilot.pause(0.6)
            assert "held_fn" in probe_names(app)
            app.query_one("#probes", FastTable).cursor = probe_names(app).index("held_fn")
            await pilot.press("d")
            await pilot.pause(0.6)
            assert "held_fn" not in probe_names(app)
            # A spec that fails while compiling: its reason replaces "adding ...".
            await pilot.press("a", *"uprobe:/etc/passwd:x", "enter")
            assert session.engine.wait(60)  # type: ignore[union-attr]
            await pilot.pause(0.6)
            assert "not an ELF" in app.status, app.status
            await pilot.press("q")
    finally:
        session.close()
        session.child.end()  # type: ignore[union-attr]
    assert none_left()
