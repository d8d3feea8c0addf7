"""`f`: the profile screen under Textual's pilot, on a replayed recording with a profile:
the hottest functions, the icicle graph, zoom, sorts, threads, and `u` on a function."""

from __future__ import annotations

import json
from pathlib import Path

from textual.binding import Binding

from adaptyst_top.runtime.sources import ReplaySource
from adaptyst_top.snapshot import ProfileFunction, ProfilePart, ProfileStack, Snapshot
from adaptyst_top.tui.app import MonitorApp
from adaptyst_top.tui.screens.profile import ProfileScreen, probe_spec

APP = "/opt/app/solver"
MAIN = ("_start", "main")


def _recording(tmp_path: Path) -> Path:
    functions = (
        ProfileFunction("main", APP, "main", 0, 100, 0.0),
        ProfileFunction("leaf", APP, "leaf", 60, 60, 0.0),
        ProfileFunction("outer", APP, "outer", 0, 60, 0.0),
        ProfileFunction("spin", APP, "spin", 40, 40, 0.0),
        ProfileFunction("wait", APP, "wait", 0, 0, 2e9),
    )
    stacks = (
        ProfileStack(7, 7, (*MAIN, "outer", "leaf"), samples=30),
        ProfileStack(7, 7, (*MAIN, "spin"), samples=20),
        ProfileStack(7, 8, ("start_thread", "wait"), off_ns=1e9),
    )
    lines = [
        Snapshot(
            t=float(i),
            host="h",
            profile=ProfilePart(99, 50 * i, functions=functions, stacks=stacks),
        )
        for i in (1, 2)
    ]
    path = tmp_path / "profiled.jsonl"
    path.write_text("".join(json.dumps(s.to_json()) + "\n" for s in lines))
    return path


async def test_the_profile_screen_lists_draws_zooms_and_sorts(tmp_path: Path) -> None:
    app = MonitorApp(ReplaySource(_recording(tmp_path)), interval=1.0, autoplay=False)
    async with app.run_test(size=(80, 24)) as pilot:
        app.step()
        app.step()
        await pilot.pause()
        await pilot.press("f")
        screen = app.screen
        assert isinstance(screen, ProfileScreen)
        listing = str(screen.query_one("#profile-functions").render())  # self first
        assert listing.index("leaf") < listing.index("spin") < listing.index("main")
        assert screen.selected_function().name == "leaf"  # type: ignore[union-attr]
        flame = str(screen.query_one("#profile-flame").render()).splitlines()
        assert flame[0].startswith("all") and flame[1].startswith("_start")
        assert "main" in flame[2] and "outer" in flame[3] and "spin" in flame[3]
        assert "leaf" in flame[4]
        # The view summed both snapshots' stacks: 60 samples through outer, 40 in spin.
        assert screen.view.tree().children["_start"].value == 100
        await pilot.press("tab", "down", "down", "down")  # in the graph
        assert screen.view.selected == (*MAIN, "outer")
        await pilot.press("enter")
        flame = str(screen.query_one("#profile-flame").render()).splitlines()
        assert flame[0].startswith("outer") and "leaf" in flame[1]
        await pilot.press("u")  # a replay adds nothing
        assert app.status == "a replay is read-only"
        await pilot.press("backspace")
        assert screen.view.zoom == MAIN
        await pilot.press("s")
        assert screen.view.sort == "total"
        listing = str(screen.query_one("#profile-functions").render())
        assert listing.index("main") < listing.index("leaf") < listing.index("spin")
        await pilot.press("o")  # off the CPU: the waiting thread's stack alone
        flame = str(screen.query_one("#profile-flame").render()).splitlines()
        assert flame[1].startswith("start_thread") and "wait" in flame[2]
        await pilot.press("t")  # PID 7 thread 7: on the CPU only, nothing off it
        assert screen.view.thread == (7, 7)
        await pilot.press("escape", "escape")
        assert not isinstance(app.screen, ProfileScreen)


async def test_without_a_profile_f_says_how_to_get_one(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    path.write_text(json.dumps(Snapshot(t=1.0, host="h").to_json()) + "\n")
    app = MonitorApp(ReplaySource(path), interval=1.0, autoplay=False)
    async with app.run_test(size=(80, 24)) as pilot:
        app.step()
        await pilot.press("f")
        assert not isinstance(app.screen, ProfileScreen)
        assert "--profile" in app.status


def test_a_function_is_probed_by_its_file_and_symbol() -> None:
    f = ProfileFunction("ns::f(int)", "/opt/app/solver", "_ZN2ns1fEi", 1, 1)
    assert probe_spec(f) == "uprobe:/opt/app/solver:_ZN2ns1fEi"
    assert probe_spec(ProfileFunction("[vdso]", "[vdso]", "")) is None


async def test_with_a_profile_and_no_probe_its_screen_comes_first(tmp_path: Path) -> None:
    """`--profile` opened on an empty probes pane whose footer did not name `f` (issue
    74's newcomer): the profile screen now comes first, at 80x24, once it has stacks."""
    app = MonitorApp(
        ReplaySource(_recording(tmp_path)), interval=1.0, autoplay=False, profile_first=True
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert not isinstance(app.screen, ProfileScreen)  # nothing sampled yet
        app.step()
        await pilot.pause()
        assert isinstance(app.screen, ProfileScreen)
        await pilot.press("escape")
        app.step()
        await pilot.pause()
        assert not isinstance(app.screen, ProfileScreen)  # first only: left, it stays left
        assert any(b.key == "f" and b.show for b in app.BINDINGS if isinstance(b, Binding))


async def test_probe_able_functions_come_first_and_slash_jumps_to_a_name(tmp_path: Path) -> None:
    """Issue 74's newcomer: the hot list began with frames no probe can attach to, and
    had no way to jump to a name."""
    functions = (
        ProfileFunction("[unknown]", "", "", 90, 90, 0.0),  # hottest, and no symbol
        ProfileFunction("leaf", APP, "leaf", 60, 60, 0.0),
        ProfileFunction("spin", APP, "spin", 40, 40, 0.0),
    )
    stacks = (ProfileStack(7, 7, (*MAIN, "[unknown]"), samples=90),)
    snap = Snapshot(
        t=1.0, host="h", profile=ProfilePart(99, 190, functions=functions, stacks=stacks)
    )
    path = tmp_path / "unknown.jsonl"
    path.write_text(json.dumps(snap.to_json()) + "\n")
    app = MonitorApp(ReplaySource(path), interval=1.0, autoplay=False)
    async with app.run_test(size=(80, 24)) as pilot:
        app.step()
        await pilot.pause()
        await pilot.press("f")
        screen = app.screen
        assert isinstance(screen, ProfileScreen)
        assert [f.name for f in screen.view.sorted_functions()] == ["leaf", "spin", "[unknown]"]
        assert screen.selected_function().name == "leaf"  # type: ignore[union-attr]
        await pilot.press("slash", *"SPI", "enter")
        assert screen.selected_function().name == "spin"  # type: ignore[union-attr]
        await pilot.press("slash", *"nothing", "enter")
        assert screen.selected_function().name == "spin"  # type: ignore[union-attr]
        assert "no function named like" in screen.said
